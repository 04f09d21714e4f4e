import type { GenerationEvent, PredictionCounts, TokenLogprob } from "../protocol/generation.js";
import type { ReasoningSplitter, SplitDelta } from "./reasoning-split.js";
import type { ChoiceEvent } from "./types.js";

/**
 * Turns a generation's engine events into choice `index`'s events, reasoning told apart from
 * content: the one place an event changes shape on its way out (later stages pass it on or hold it).
 * Log probabilities follow the tokens: those of tokens counted as content go out with the content,
 * those of reasoning tokens are dropped (OpenAI reports logprobs for the answer only); they wait
 * while the splitter has not settled their tokens.
 */
export async function* splitReasoning(
  index: number,
  events: AsyncIterable<GenerationEvent>,
  splitter: ReasoningSplitter,
): AsyncGenerator<ChoiceEvent> {
  let tokensSeen = 0;
  let pendingLogprobs: TokenLogprob[] | undefined;
  // The prediction's counts so far (cumulative in the engine's events), carried by every event after them.
  let prediction: PredictionCounts | undefined;
  const counts = (completionTokens: number) => ({
    index,
    completionTokens,
    reasoningTokens: splitter.reasoningTokens,
    ...(prediction ? { prediction } : {}),
  });
  function* release(delta: SplitDelta, completionTokens: number): Generator<ChoiceEvent> {
    if (delta.reasoningTokens > 0 && pendingLogprobs) pendingLogprobs = [];
    if (delta.reasoning) yield { type: "reasoning", text: delta.reasoning, ...counts(completionTokens) };
    const logprobs = delta.contentTokens > 0 ? pendingLogprobs : undefined;
    if (delta.content || logprobs?.length) {
      yield { type: "text", text: delta.content, ...counts(completionTokens), ...(pendingLogprobs ? { logprobs: logprobs ?? [] } : {}) };
      if (logprobs) pendingLogprobs = [];
    }
  }
  for await (const event of events) {
    if (event.type === "preempted") {
      yield { type: "preempted", ...counts(tokensSeen) };
    } else if (event.type === "text") {
      prediction = event.prediction ?? prediction;
      if (event.logprobs) (pendingLogprobs ??= []).push(...event.logprobs);
      const delta = splitter.push(event.text, event.completionTokens - tokensSeen);
      tokensSeen = event.completionTokens;
      yield* release(delta, event.completionTokens);
    } else if (event.type === "tool_calls") {
      tokensSeen = event.completionTokens;
      yield { type: "tool_calls", calls: event.calls, ...counts(event.completionTokens) };
    } else if (event.type === "finish") {
      prediction = event.prediction ?? prediction;
      // A cancelled generation has nobody left to read its held text; only the count matters.
      if (event.reason !== "cancelled") yield* release(splitter.finish(event.completionTokens - tokensSeen), event.completionTokens);
      const reported =
        event.promptTokens === undefined ? undefined : { promptTokens: event.promptTokens, cachedTokens: event.cachedTokens ?? 0 };
      const speculation = event.speculation ? { speculation: event.speculation } : {};
      yield { type: "finish", reason: event.reason, ...counts(event.completionTokens), ...(reported ? { reported } : {}), ...speculation };
    }
  }
}
