import type { EngineRequest } from "../../src/engine/core/request.js";
import type { ShardScheduler } from "../../src/engine/core/scheduler.js";
import type { StepPlan } from "../../src/engine/core/step-plan.js";
import type { SamplerSpec, StepReply } from "../../src/engine/runner/step-protocol.js";

/** Greedy sampling with nothing else on: what the scheduler tests and the tier simulator give every request. */
export const GREEDY_SAMPLER: SamplerSpec = {
  temperature: 0,
  topP: 1,
  topK: 0,
  minP: 0,
  seed: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
  repetitionPenalty: 1,
  logitBias: [],
};

/**
 * Plans a step and plays the runner's part: every planned token is computed, every sample draws
 * `token` (or what `token(request)` gives), and the scheduler takes the reply as it takes the
 * real runner's. The steps are exact, no model involved. `priorityNearby`: as the shard's group says
 * when a priority request ran on one of the model's shards a moment ago.
 */
export function step(s: ShardScheduler, token: number | ((request: EngineRequest) => number) = 1, priorityNearby = false): StepPlan {
  const plan = s.schedule(priorityNearby);
  const reply: StepReply = {
    type: "step",
    tokens: Int32Array.from(plan.sampled.map((r) => (typeof token === "number" ? token : token(r)))),
    logprobs: plan.sampled.map(() => null),
    failedSamplers: [],
    failedRestores: [],
    setupMs: 0,
    decodeMs: 0,
    sampleMs: 0,
  };
  s.update(plan, reply);
  return plan;
}
