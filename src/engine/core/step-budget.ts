import { addShapes, chunkShape, EMPTY_SHAPE, type StepCostModel, type StepShape } from "./cost-model.js";
import { planDrafts } from "./draft-budget.js";
import type { EngineRequest } from "./request.js";
import type { StepPlan } from "./step-plan.js";
import { TIER_RANK as RANK, type PerTier } from "../../protocol/tiers.js";

/** A tier's service targets: time to first token, and between tokens. */
export interface TierTargets {
  ttftMs: number;
  itlMs: number;
}

export type TargetsByTier = PerTier<TierTargets>;

export interface StepBudgetOptions {
  /** Most tokens in one step (the runner's batch size). */
  stepTokens: number;
  /** Most prompt tokens one request gets while other prompts wait for theirs (vLLM's long_prefill_token_threshold). */
  chunkCap: number;
  /** Prompt tokens a step carries at least while any prompt loads, whatever the budget: prefill never stops. */
  minChunk: number;
  targets: TargetsByTier;
  /** Cells a sequence holds: a draft never reaches past them. */
  cellsPerSequence: number;
  /** This step verifies a short draft even where the cost model says drafts do not pay. */
  exploreDrafts?: boolean;
  /** Most draft tokens one request may verify this step (ShardSpeculation.draftCeiling). */
  draftCeiling?: number;
  /**
   * A priority stream ran on one of the model's shards a moment ago (shard-group.ts, PRIORITY_LINGER_MS): steps stay
   * within priority's inter-token target, so its client's next request waits for a short step.
   */
  priorityNearby?: boolean;
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
/** The defaults of the settings; flex and batch have no targets of their own and run at the default tier's pace. */
export const DEFAULT_TARGETS: TargetsByTier = {
  priority: { ttftMs: 1000, itlMs: 50 },
  default: { ttftMs: 5000, itlMs: 300 },
  flex: { ttftMs: 5000, itlMs: 300 },
  batch: { ttftMs: 5000, itlMs: 300 },
};

/** A scheduler's options with the defaults filled in. */
export function budgetOptions(options: {
  stepTokens: number;
  cellsPerSequence: number;
  chunkCap?: number;
  minChunk?: number;
  targets?: TargetsByTier;
}): StepBudgetOptions {
  return {
    stepTokens: options.stepTokens,
    cellsPerSequence: options.cellsPerSequence,
    chunkCap: options.chunkCap ?? DEFAULT_CHUNK_CAP,
    minChunk: options.minChunk ?? DEFAULT_MIN_CHUNK,
    targets: options.targets ?? DEFAULT_TARGETS,
  };
}

/**
 * Fills a step (stall-free batching, after Sarathi-Serve): every decoding stream's next token first,
 * in the policy's order; then prompt chunks, sized by the shard's cost model so that the step's
 * predicted time stays within the inter-token target of the most demanding tier decoding there.
 * Each prompt first gets at most `chunkCap` tokens, so the first in line does not take the whole
 * step; what is left then goes to them in order. A prompt of a tier at least as demanding as the
 * decoders keeps a pace that loads it within its time-to-first-token target; and some prompt always
 * gets `minChunk`, so prefill never stops.
 *
 * While a priority stream decodes on the shard, lower tiers' work (decodes and prompt chunks) only
 * fills the slack: a step carries at most PRIORITY_SLACK more than priority's own tokens would take
 * (see `decodesWithin`), so a lone priority stream keeps nearly the pace it would have alone; one
 * lower-tier prompt at a time loads at its own TTFT pace. A lower tier's stream left out goes in
 * before it would wait past its own inter-token target: lower tiers slow to their pace, never stop.
 */
export function fillBatch(
  plan: StepPlan,
  ordered: readonly EngineRequest[],
  options: StepBudgetOptions,
  cost: StepCostModel,
  /** Tokens the request may compute this step (a leader stops before its last prompt token until its siblings copy). */
  limit: (request: EngineRequest) => number,
): StepBudget {
  const { carried: decoding, lowerMs } = decodesWithin(ordered.filter((r) => r.pending === 1).slice(0, options.stepTokens), options, cost);
  const decodingMs = decoding.length === 0 ? Infinity : Math.min(...decoding.map((r) => options.targets[r.tier].itlMs));
  const budgetMs = options.priorityNearby ? Math.min(decodingMs, options.targets.priority.itlMs) : decodingMs;
  const strictest = Math.min(...decoding.map((r) => RANK[r.tier]));
  const fill = new StepFill(decoding, { options, cost, limit, budgetMs, lowerMs, strictest });
  const prompts = ordered.filter((r) => r.pending > 1);
  fill.prompts(prompts);
  // Drafts last, in what the step's time and tokens have left (core/draft-budget.ts).
  const itlMs = (request: EngineRequest) => options.targets[request.tier].itlMs;
  const drafts = planDrafts(
    decoding,
    fill.shape,
    {
      tokensLeft: fill.tokensLeft,
      cellsPerSequence: options.cellsPerSequence,
      itlMs,
      lowerMs,
      explore: options.exploreDrafts,
      ceiling: options.draftCeiling,
    },
    cost,
  );
  for (const request of decoding) plan.add(request, 1, drafts.get(request));
  for (const [request, count] of fill.counts) if (count > 0) plan.add(request, count);
  plan.full =
    fill.tokensLeft === 0 ||
    ordered.some((r) => r.pending === 1 && !decoding.includes(r)) ||
    prompts.some((r) => (fill.counts.get(r) ?? 0) < limit(r));
  return {
    ms: Number.isFinite(budgetMs) ? Math.min(budgetMs, lowerMs) : null,
    tokens: plan.batchSize,
    plannedMs: cost.predict(plan.shape),
  };
}

interface FillContext {
  options: StepBudgetOptions;
  cost: StepCostModel;
  limit: (request: EngineRequest) => number;
  /** The step's time budget: the strictest inter-token target decoding (or nearby priority's). */
  budgetMs: number;
  /** Where a priority stream decodes, the time lower tiers' work may bring the step to; else Infinity. */
  lowerMs: number;
  /** The rank of the most demanding tier decoding. */
  strictest: number;
}

/** A step being filled with prompt chunks after its decodes: its shape so far, the tokens left, each prompt's chunk. */
class StepFill {
  tokensLeft: number;
  shape: StepShape;
  readonly counts = new Map<EngineRequest, number>();
  /** Beside a priority stream, one lower-tier prompt at a time is paced (the others wait for the slack). */
  private pacedBeside = false;

  constructor(
    decoding: readonly EngineRequest[],
    private readonly ctx: FillContext,
  ) {
    this.tokensLeft = ctx.options.stepTokens - decoding.length;
    this.shape = decoding.reduce((sum, r) => addShapes(sum, chunkShape(r.computed, 1, true)), EMPTY_SHAPE);
  }

  /**
   * With no priority stream decoding here, a priority prompt loads whole in this step, before any
   * other prompt: its time to first token is its prefill, and one long step is within what lower
   * tiers' inter-token targets allow. Otherwise each prompt gets at most `chunkCap` (paced), then
   * what is left in order; some prompt always gets `minChunk` unless priority decodes.
   */
  prompts(prompts: readonly EngineRequest[]): void {
    const { limit, strictest, lowerMs, options } = this.ctx;
    const rushed = strictest > RANK.priority ? prompts.filter((r) => r.tier === "priority" && limit(r) > 0) : [];
    for (const request of rushed) this.give(request, Math.min(limit(request), this.tokensLeft));
    if (rushed.length === 0) {
      for (const request of prompts) this.grant(request, options.chunkCap, true);
      for (const request of prompts) this.grant(request, Infinity, false);
    }
    const floor = this.counts.size === 0 && !Number.isFinite(lowerMs) ? prompts.find((r) => limit(r) > 0) : undefined;
    if (floor) this.give(floor, Math.min(options.minChunk, limit(floor), this.tokensLeft));
  }

  private give(request: EngineRequest, count: number): void {
    const from = request.computed + (this.counts.get(request) ?? 0);
    this.counts.set(request, (this.counts.get(request) ?? 0) + count);
    this.shape = addShapes(this.shape, chunkShape(from, count, from + count === request.tokens.length));
    this.tokensLeft -= count;
  }

  private grant(request: EngineRequest, most: number, paced: boolean): void {
    const { cost, budgetMs, lowerMs, options, strictest } = this.ctx;
    const already = this.counts.get(request) ?? 0;
    const from = request.computed + already;
    const room = Math.min(most - already, this.ctx.limit(request) - already, this.tokensLeft);
    if (room <= 0) return;
    const ends = (count: number) => from + count === request.tokens.length;
    // Beside a priority stream, a lower tier's prompt fills the slack, and loads at least at the
    // pace of its own TTFT target in steps of that size (a token or two a step, not a burst).
    const beside = request.tier !== "priority" && Number.isFinite(lowerMs);
    const withinMs = beside ? Math.min(budgetMs, lowerMs) : budgetMs;
    let count = Number.isFinite(withinMs) ? cost.chunkWithin(this.shape, withinMs, from, room, ends) : room;
    if (paced && beside && !this.pacedBeside) {
      // Never past priority's own target, but always a token.
      this.pacedBeside = true;
      const most = Math.max(1, cost.chunkWithin(this.shape, budgetMs, from, room, ends));
      count = Math.max(count, Math.min(room, most, pace(request, lowerMs, options)));
    } else if (paced && RANK[request.tier] <= strictest) count = Math.max(count, Math.min(room, pace(request, budgetMs, options)));
    if (count > 0) this.give(request, count);
  }
}

/** Lower tiers add at most this share of the time priority's own work in a step takes. */
export const PRIORITY_SLACK = 0.25;

/**
 * A lower tier's request left out of enough steps in a row that one more would make it wait past its
 * own inter-token target (at steps of `stepMs`) is carried whatever the cost.
 */
const mustRun = (request: EngineRequest, options: StepBudgetOptions, stepMs: number) =>
  (request.yieldedSteps + 2) * stepMs >= options.targets[request.tier].itlMs;

/**
 * The decodes a step carries, and the time lower tiers' work may bring the step to. While a
 * priority stream decodes on the shard: every priority stream's next token, then lower tiers' (in
 * the policy's order: standard before flex) only while the step's predicted time stays within
 * (1 + PRIORITY_SLACK) × priority's own decodes, and never past priority's inter-token target; a
 * stream that must run (`mustRun`) goes in whatever the cost.
 */
function decodesWithin(
  decoding: readonly EngineRequest[],
  options: StepBudgetOptions,
  cost: StepCostModel,
): { carried: EngineRequest[]; lowerMs: number } {
  const priority = decoding.filter((r) => r.tier === "priority");
  if (priority.length === 0) {
    for (const request of decoding) request.yieldedSteps = 0;
    return { carried: [...decoding], lowerMs: Infinity };
  }
  let shape = priority.reduce((sum, r) => addShapes(sum, chunkShape(r.computed, 1, true)), EMPTY_SHAPE);
  const lower = decoding.filter((r) => r.tier !== "priority");
  // Room for at least one lower-tier token a step, so lower tiers keep their pace by turns.
  const oneMore = lower.length > 0 ? cost.predict(addShapes(shape, chunkShape(lower[0]!.computed, 1, true))) : 0;
  const lowerMs = Math.min(options.targets.priority.itlMs, Math.max(oneMore, (1 + PRIORITY_SLACK) * cost.predict(shape)));
  const carried = [...priority];
  // By turns: the request that gave way longest goes first (then the policy's order).
  for (const request of [...lower].sort((a, b) => b.yieldedSteps - a.yieldedSteps)) {
    const withIt = addShapes(shape, chunkShape(request.computed, 1, true));
    if (!mustRun(request, options, lowerMs) && cost.predict(withIt) > lowerMs) {
      request.yieldedSteps++;
      continue;
    }
    request.yieldedSteps = 0;
    carried.push(request);
    shape = withIt;
  }
  return { carried, lowerMs };
}

/**
 * Prompt tokens a step gives a request so its prompt loads in about its tier's time-to-first-token
 * target, if each step takes the budget: ceil(prompt length × budget / target), at most `chunkCap`
 * and what is left of it.
 */
function pace(request: EngineRequest, budgetMs: number, options: StepBudgetOptions): number {
  if (!Number.isFinite(budgetMs)) return 0;
  const remaining = request.promptLength - request.computed;
  if (remaining <= 0) return 0;
  const perStep = Math.ceil((request.promptLength * budgetMs) / Math.max(budgetMs, options.targets[request.tier].ttftMs));
  return Math.min(options.chunkCap, remaining, perStep);
}
