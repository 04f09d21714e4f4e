import type { Draft } from "./drafter.js";
import type { RequestOutput } from "./output.js";
import type { EngineRequest } from "./request.js";
import type { SampledLogprob } from "../runner/step-protocol.js";
import type { FinishReason } from "../types.js";

/** What a request sampled in one step: one token, plus the draft tokens it accepted. */
export interface SampledRun {
  tokens: Int32Array;
  logprobs: Array<SampledLogprob | null>;
}

/**
 * Takes a request's sampled run into its tokens and output, one token at a time (each accepted
 * draft token stands on the one before it, whose cell the request now holds): grammar, stop
 * strings, JSON end and the token limit see each in turn, and the run ends where the output does.
 * Returns why the output ended, if it did, and from which position the sequence then holds cells
 * past the request's tokens (accepted draft tokens after the end), for the scheduler to remove.
 */
export function takeRun(
  request: EngineRequest,
  output: RequestOutput,
  run: SampledRun,
  draft: Draft | undefined,
  cellsPerSequence: number,
): { finish?: FinishReason; extraCellsFrom?: number } {
  const accepted = run.tokens.length - 1;
  const drafted = draft ? request.speculation : undefined;
  drafted?.settle(draft!, accepted);
  const cellsHeld = request.computed + accepted;
  for (let j = 0; j < run.tokens.length; j++) {
    if (j > 0) request.computed++;
    request.tokens.push(run.tokens[j]!);
    // Before the token's events, which carry the prediction's counts.
    drafted?.deliver(draft!, j, accepted);
    const { events, finish } = output.accept(run.tokens[j]!, run.logprobs[j] ?? null, cellsPerSequence - request.tokens.length);
    for (const event of events) request.events.push(event);
    if (!finish) continue;
    // Tokens 0..j are output; the accepted draft tokens after them are not.
    return { finish, ...(cellsHeld > request.computed ? { extraCellsFrom: request.computed } : {}) };
  }
  return {};
}
