import type { EngineEvent, FinishReason, TokenLogprob, ToolCall } from "../engine/types.js";
import type { ReasoningSplitter, SplitDelta } from "./reasoning-split.js";

/** A generation's events with reasoning told apart from content; token counts are running totals. */
export type SplitEvent =
  | { type: "preempted"; completionTokens: number; reasoningTokens: number }
  | { type: "reasoning"; text: string; completionTokens: number; reasoningTokens: number }
  | { type: "text"; text: string; completionTokens: number; reasoningTokens: number; logprobs?: TokenLogprob[] }
  | { type: "tool_calls"; calls: ToolCall[]; completionTokens: number; reasoningTokens: number }
  | { type: "finish"; reason: FinishReason; completionTokens: number; reasoningTokens: number; reported?: ReportedPrompt };

/** The prompt's size as an upstream engine's usage reported it (see EngineEvent `finish`). */
export interface ReportedPrompt {
  promptTokens: number;
  cachedTokens: number;
}

/**
 * Runs a generation's text through the splitter. Log probabilities follow the tokens: those of
 * tokens counted as content go out with the content, those of reasoning tokens are dropped (OpenAI
 * reports logprobs for the answer only); they wait while the splitter has not settled their tokens.
 */
export async function* splitReasoning(events: AsyncIterable<EngineEvent>, splitter: ReasoningSplitter): AsyncGenerator<SplitEvent> {
  let tokensSeen = 0;
  let pendingLogprobs: TokenLogprob[] | undefined;
  function* release(delta: SplitDelta, completionTokens: number): Generator<SplitEvent> {
    const reasoningTokens = splitter.reasoningTokens;
    if (delta.reasoningTokens > 0 && pendingLogprobs) pendingLogprobs = [];
    if (delta.reasoning) yield { type: "reasoning", text: delta.reasoning, completionTokens, reasoningTokens };
    const logprobs = delta.contentTokens > 0 ? pendingLogprobs : undefined;
    if (delta.content || logprobs?.length) {
      yield { type: "text", text: delta.content, completionTokens, reasoningTokens, ...(pendingLogprobs ? { logprobs: logprobs ?? [] } : {}) };
      if (logprobs) pendingLogprobs = [];
    }
  }
  for await (const event of events) {
    if (event.type === "preempted") {
      yield { type: "preempted", completionTokens: tokensSeen, reasoningTokens: splitter.reasoningTokens };
    } else if (event.type === "text") {
      if (event.logprobs) (pendingLogprobs ??= []).push(...event.logprobs);
      const delta = splitter.push(event.text, event.completionTokens - tokensSeen);
      tokensSeen = event.completionTokens;
      yield* release(delta, event.completionTokens);
    } else if (event.type === "tool_calls") {
      tokensSeen = event.completionTokens;
      yield { type: "tool_calls", calls: event.calls, completionTokens: event.completionTokens, reasoningTokens: splitter.reasoningTokens };
    } else if (event.type === "finish") {
      // A cancelled generation has nobody left to read its held text; only the count matters.
      if (event.reason !== "cancelled") yield* release(splitter.finish(event.completionTokens - tokensSeen), event.completionTokens);
      const reported = event.promptTokens === undefined ? undefined : { promptTokens: event.promptTokens, cachedTokens: event.cachedTokens ?? 0 };
      yield { type: "finish", reason: event.reason, completionTokens: event.completionTokens, reasoningTokens: splitter.reasoningTokens, ...(reported ? { reported } : {}) };
    }
  }
}
