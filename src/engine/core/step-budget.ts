import { addShapes, chunkShape, EMPTY_SHAPE, type StepCostModel } from "./cost-model.js";
import type { EngineRequest } from "./request.js";
import type { StepPlan } from "./step-plan.js";
import type { SchedulingClass } from "../types.js";

/** A tier's service targets: time to first token, and between tokens. */
export interface TierTargets {
  ttftMs: number;
  itlMs: number;
}

export type TargetsByClass = Record<SchedulingClass, TierTargets>;

export interface StepBudgetOptions {
  /** Most tokens in one step (the runner's batch size). */
  stepTokens: number;
  /** Most prompt tokens one request gets while other prompts wait for theirs (vLLM's long_prefill_token_threshold). */
  chunkCap: number;
  /** Prompt tokens a step carries at least while any prompt loads, whatever the budget: prefill never stops. */
  minChunk: number;
  targets: TargetsByClass;
}

/** What the last planned step was allowed and what it carried, for /health. */
export interface StepBudget {
  /** The time budget (ms): the inter-token target of the most demanding tier decoding; null: none decoding. */
  ms: number | null;
  /** Tokens the step carried. */
  tokens: number;
  /** The cost model's prediction for it (ms). */
  plannedMs: number;
}

export const DEFAULT_CHUNK_CAP = 64;
export const DEFAULT_MIN_CHUNK = 8;
/** The defaults of the settings; flex and batch have no targets of their own and run at standard's pace. */
export const DEFAULT_TARGETS: TargetsByClass = {
  priority: { ttftMs: 1000, itlMs: 50 },
  standard: { ttftMs: 5000, itlMs: 300 },
  flex: { ttftMs: 5000, itlMs: 300 },
  batch: { ttftMs: 5000, itlMs: 300 },
};

/** A scheduler's options with the defaults filled in. */
export function budgetOptions(options: { stepTokens: number; chunkCap?: number; minChunk?: number; targets?: TargetsByClass }): StepBudgetOptions {
  return {
    stepTokens: options.stepTokens,
    chunkCap: options.chunkCap ?? DEFAULT_CHUNK_CAP,
    minChunk: options.minChunk ?? DEFAULT_MIN_CHUNK,
    targets: options.targets ?? DEFAULT_TARGETS,
  };
}

const RANK: Record<SchedulingClass, number> = { priority: 0, standard: 1, flex: 2, batch: 3 };

/**
 * Fills a step (stall-free batching, after Sarathi-Serve): every decoding stream's next token first,
 * in the policy's order; then prompt chunks, sized by the shard's cost model so that the step's
 * predicted time stays within the inter-token target of the most demanding tier decoding there.
 * Each prompt first gets at most `chunkCap` tokens, so the first in line does not take the whole
 * step; what is left then goes to them in order. A prompt of a tier at least as demanding as the
 * decoders keeps a pace that loads it within its time-to-first-token target; and some prompt always
 * gets `minChunk`, so prefill never stops.
 */
export function fillBatch(
  plan: StepPlan,
  ordered: readonly EngineRequest[],
  options: StepBudgetOptions,
  cost: StepCostModel,
  /** Tokens the request may compute this step (a leader stops before its last prompt token until its siblings copy). */
  limit: (request: EngineRequest) => number,
): StepBudget {
  let tokensLeft = options.stepTokens;
  const decoding = decodesWithin(ordered.filter((r) => r.pending === 1).slice(0, tokensLeft), options, cost);
  tokensLeft -= decoding.length;
  let shape = decoding.reduce((sum, r) => addShapes(sum, chunkShape(r.computed, 1, true)), EMPTY_SHAPE);
  const budgetMs = decoding.length === 0 ? Infinity : Math.min(...decoding.map((r) => options.targets[r.schedulingClass].itlMs));
  const strictest = Math.min(...decoding.map((r) => RANK[r.schedulingClass]));
  const prompts = ordered.filter((r) => r.pending > 1);
  const counts = new Map<EngineRequest, number>();
  const grant = (request: EngineRequest, most: number, paced: boolean) => {
    const already = counts.get(request) ?? 0;
    const from = request.computed + already;
    const room = Math.min(most - already, limit(request) - already, tokensLeft);
    if (room <= 0) return;
    const ends = (count: number) => from + count === request.tokens.length;
    let count = Number.isFinite(budgetMs) ? cost.chunkWithin(shape, budgetMs, from, room, ends) : room;
    if (paced && RANK[request.schedulingClass] <= strictest) count = Math.max(count, Math.min(room, pace(request, budgetMs, options)));
    if (count === 0) return;
    counts.set(request, already + count);
    shape = addShapes(shape, chunkShape(from, count, ends(count)));
    tokensLeft -= count;
  };
  for (const request of prompts) grant(request, options.chunkCap, true);
  for (const request of prompts) grant(request, Infinity, false);
  if (counts.size === 0 && prompts.length > 0) {
    const first = prompts.find((r) => limit(r) > 0);
    if (first) {
      const count = Math.min(options.minChunk, limit(first), tokensLeft);
      if (count > 0) counts.set(first, count);
      tokensLeft -= count;
      shape = addShapes(shape, chunkShape(first.computed, count, first.computed + count === first.tokens.length));
    }
  }
  for (const request of decoding) plan.add(request, 1);
  for (const [request, count] of counts) plan.add(request, count);
  plan.full = tokensLeft === 0 || ordered.some((r) => r.pending === 1 && !decoding.includes(r)) || prompts.some((r) => (counts.get(r) ?? 0) < limit(r));
  return { ms: Number.isFinite(budgetMs) ? budgetMs : null, tokens: plan.batchSize, plannedMs: cost.predict(shape) };
}

/**
 * The decodes a step carries. While a priority stream decodes on the shard, the step keeps to
 * priority's inter-token target: every priority stream's next token, then lower tiers' (in the
 * policy's order: standard before flex) only while the predicted step stays within that target. A
 * stream left out gives way at most as long as its own tier's target allows (its target over
 * priority's, in steps), then it is carried whatever the cost: lower tiers slow to their own pace,
 * never stop.
 */
function decodesWithin(decoding: readonly EngineRequest[], options: StepBudgetOptions, cost: StepCostModel): EngineRequest[] {
  const budgetMs = options.targets.priority.itlMs;
  if (!decoding.some((r) => r.schedulingClass === "priority")) {
    for (const request of decoding) request.yieldedSteps = 0;
    return [...decoding];
  }
  let shape = EMPTY_SHAPE;
  const carried: EngineRequest[] = [];
  for (const request of decoding) {
    const withIt = addShapes(shape, chunkShape(request.computed, 1, true));
    const mayYield = request.schedulingClass !== "priority" && request.yieldedSteps + 1 < options.targets[request.schedulingClass].itlMs / budgetMs;
    if (mayYield && cost.predict(withIt) > budgetMs) {
      request.yieldedSteps++;
      continue;
    }
    request.yieldedSteps = 0;
    carried.push(request);
    shape = withIt;
  }
  return carried;
}

/**
 * Prompt tokens a step gives a request so its prompt loads in about its tier's time-to-first-token
 * target, if each step takes the budget: ceil(remaining × budget / target), at most `chunkCap`.
 */
function pace(request: EngineRequest, budgetMs: number, options: StepBudgetOptions): number {
  if (!Number.isFinite(budgetMs)) return 0;
  const remaining = request.promptLength - request.computed;
  if (remaining <= 0) return 0;
  return Math.min(options.chunkCap, Math.ceil((remaining * budgetMs) / Math.max(budgetMs, options.targets[request.schedulingClass].ttftMs)));
}
