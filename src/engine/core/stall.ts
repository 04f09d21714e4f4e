import type { EngineRequest } from "./request.js";
import type { StepPlan } from "./step-plan.js";

/** A running request made no progress for the stall limit and was ended, freeing its sequence. */
export class StalledError extends Error {}

/**
 * After a step has run: a request in its batch progressed; one left out of a full batch waited its
 * turn, which counts as progress too. Only one left out of a batch with room (paused, or with
 * nothing it could compute) goes on aging toward the stall limit.
 */
export function noteProgress(running: readonly EngineRequest[], step: StepPlan, stepTokens: number, now = performance.now()): void {
  // Full in tokens, or in time: the step budget held some request back.
  const full = step.full || step.batchSize >= stepTokens;
  const inBatch = new Set(step.scheduled.map((s) => s.request));
  for (const request of running) {
    if (inBatch.has(request) || (full && !request.paused) || request.copyFrom !== undefined) request.progressAt = now;
  }
}

/** The running requests that have held their sequence without progress for the limit, each with the error it ends with. */
export function stalledRequests(
  running: readonly EngineRequest[],
  stallTimeoutMs: number,
  now = performance.now(),
): Array<[EngineRequest, StalledError]> {
  const seconds = Math.round(stallTimeoutMs / 100) / 10;
  return running
    .filter((r) => now - r.progressAt >= stallTimeoutMs)
    .map((r) => [
      r,
      new StalledError(
        `The generation made no progress for ${seconds} s${r.paused ? " (its output was not being read)" : ""} and was ended.`,
      ),
    ]);
}

/** How often a shard with running requests but an empty batch looks for stalled ones. */
export function stallCheckMs(stallTimeoutMs: number): number {
  return Math.max(10, Math.min(1000, stallTimeoutMs / 4));
}
