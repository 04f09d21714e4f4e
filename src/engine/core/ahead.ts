import type { EngineRequest } from "./request.js";
import { StepPlan } from "./step-plan.js";

/**
 * Steps planned ahead (vLLM v1's async scheduling, in its plainest case). While the runner decodes a
 * step in which every running request samples its next token, the step after it can only be the
 * same decodes again, each on the token its request is drawing now: the runner knows that token
 * before the main thread does. So the shard plans that step before the reply and sends it at once;
 * the runner starts it the moment it has sampled, instead of waiting for its reply to reach the
 * main thread, be post-processed, and a new step to come back (two thread wake-ups and the
 * main thread's work, ~0.8 of a ~9 ms step at c1 on 2 cores).
 *
 * Only where nothing else could change the next step: no request waiting to be admitted, none
 * paused, cancelled, moving, copying or restoring; no draft in flight (its accepted length decides
 * the next positions), none whose output is quoting or has a prediction left (a draft is likely
 * after the token drawn now, and the step ahead has none: core/drafter.ts), no request that could
 * reach `max_tokens` or its sequence's end on the token drawn ahead of time, and nothing freed or
 * removed since the last step. A request that ends on the token drawn now (an end token, a stop
 * string) has one decode too many in the step ahead: its output is dropped, and its cell is removed
 * with the next step's operations.
 */
export function aheadAllowed(inFlight: StepPlan, running: readonly EngineRequest[], cellsPerSequence: number): boolean {
  if (inFlight.batchSize === 0 || inFlight.full || inFlight.otherAdaptersWait || inFlight.drafts.size > 0) return false;
  if (inFlight.sampled.length !== running.length || inFlight.scheduled.length !== running.length) return false;
  const sampling = new Set(inFlight.sampled);
  return running.every((r) => sampling.has(r) && continuesPlainly(r, cellsPerSequence));
}

function continuesPlainly(request: EngineRequest, cellsPerSequence: number): boolean {
  if (request.status !== "running" || request.paused || request.abortRequested || request.moveTo !== undefined) return false;
  if (request.copyFrom !== undefined || request.restoring > 0 || request.pending !== 1) return false;
  // A draft likely after the token drawn now would be lost to the step ahead (it has none).
  if (request.speculation?.mightDraftNext()) return false;
  // The step ahead samples the token after the one drawn now: both must fit the request's limits.
  const afterAhead = request.tokens.length + 2;
  return afterAhead - request.promptLength <= request.spec.maxTokens && afterAhead < cellsPerSequence;
}

/** The step after `inFlight`: each of its requests decodes the token it is drawing now, and samples. */
export function planAhead(inFlight: StepPlan): StepPlan {
  const plan = new StepPlan();
  plan.adapter = inFlight.adapter;
  for (const request of inFlight.sampled) {
    plan.addAhead(request);
    request.ahead++;
  }
  return plan;
}
