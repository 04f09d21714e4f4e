import type { TokenLogprob, ToolDefinition } from "../protocol/generation.js";
import type { ChoiceEvent } from "./types.js";
import { mayBeToolCall, parseToolCalls, partialToolCall } from "./tool-calls.js";

export type ToolShaping =
  { mode: "none" } | { mode: "forced"; tools: readonly ToolDefinition[] } | { mode: "auto"; tools: readonly ToolDefinition[] };

/**
 * Turns one generation into choice events. With tools offered, text that may be a call is held
 * back: forced (`required` or a named tool) holds everything and, the output being grammar-bound,
 * returns it as tool calls; `auto` holds text only while it still starts like a call (`{`, `[`,
 * `<tool_call>` or a code fence) and, at the end, returns tool calls if the whole text parses as a
 * call of an offered tool (see parseToolCalls), else releases it as content. Reasoning is never
 * held: only the content after it can be a call.
 */
export async function* shapeChoice(generation: AsyncGenerator<ChoiceEvent>, shaping: ToolShaping): AsyncGenerator<ChoiceEvent> {
  let holding = shaping.mode !== "none";
  let held = "";
  let heldLogprobs: TokenLogprob[] | undefined;
  let upstreamCalls = false;
  for await (const event of generation) {
    const { index } = event;
    const counts = {
      completionTokens: event.completionTokens,
      reasoningTokens: event.reasoningTokens,
      ...(event.prediction ? { prediction: event.prediction } : {}),
    };
    if (event.type === "reasoning" || event.type === "preempted") {
      yield event;
      continue;
    }
    if (event.type === "tool_calls") {
      // An upstream engine parsed these calls itself; they pass as they are.
      upstreamCalls = true;
      yield event;
      continue;
    }
    if (event.type === "text") {
      if (holding) {
        held += event.text;
        if (event.logprobs) (heldLogprobs ??= []).push(...event.logprobs);
        if (shaping.mode === "auto" && !mayBeToolCall(held)) {
          holding = false;
          yield { type: "text", index, text: held, ...counts, ...(heldLogprobs ? { logprobs: heldLogprobs } : {}) };
          held = "";
          heldLogprobs = undefined;
        }
        continue;
      }
      yield event;
      continue;
    }
    yield* finishEvents(event, { held, heldLogprobs, holding, upstreamCalls }, shaping, counts);
    return;
  }
}

type FinishEvent = Extract<ChoiceEvent, { type: "finish" }>;
type Counts = Pick<FinishEvent, "completionTokens" | "reasoningTokens" | "prediction">;

/** The end of a choice: held text released, or parsed into tool calls, then the finish with its reason. */
function* finishEvents(
  event: FinishEvent,
  state: { held: string; heldLogprobs: TokenLogprob[] | undefined; holding: boolean; upstreamCalls: boolean },
  shaping: ToolShaping,
  counts: Counts,
): Generator<ChoiceEvent> {
  const { index } = event;
  const { held, heldLogprobs } = state;
  const heldText = (): ChoiceEvent => ({ type: "text", index, text: held, ...counts, ...(heldLogprobs ? { logprobs: heldLogprobs } : {}) });
  const reported = {
    ...(event.reported ? { reported: event.reported } : {}),
    ...(event.speculation ? { speculation: event.speculation } : {}),
  };
  if (state.upstreamCalls) {
    if (held && event.reason !== "cancelled") yield heldText();
    yield { type: "finish", index, reason: event.reason === "stop" ? "tool_calls" : event.reason, ...counts, ...reported };
    return;
  }
  if (state.holding && event.reason !== "cancelled" && shaping.mode !== "none") {
    // A forced call cut by max_tokens still comes back as a call, with its partial arguments.
    const cut = event.reason === "length";
    const calls = cut ? (shaping.mode === "forced" ? partialToolCall(held, shaping.tools) : null) : parseToolCalls(held, shaping.tools);
    if (calls) {
      yield { type: "tool_calls", index, calls, ...counts };
      yield { type: "finish", index, reason: cut ? "length" : "tool_calls", ...counts, ...reported };
      return;
    }
    if (held) yield heldText();
  }
  yield event;
}
