import { addShapes, attendedBy, type StepCostModel, type StepShape } from "./cost-model.js";
import type { Draft } from "./drafter.js";
import type { EngineRequest } from "./request.js";
import { DRAFT_TOKENS_PER_STEP, MAX_DRAFT_PER_REQUEST } from "./speculation.js";
import { TIER_RANK } from "../../protocol/tiers.js";

export interface DraftLimits {
  /** Batch tokens the step has left. */
  tokensLeft: number;
  cellsPerSequence: number;
  /** A decoding stream's inter-token target (ms): the step may take it times the tokens the step is expected to bring the stream. */
  itlMs: (request: EngineRequest) => number;
  /** What lower tiers' work may bring the step to beside a priority stream (Infinity: none decoding). */
  lowerMs: number;
  /** Verify a short draft even where the cost model says it does not pay (ShardSpeculation.exploring). */
  explore?: boolean;
  /** Most draft tokens one request may verify (ShardSpeculation.draftCeiling); absent: MAX_DRAFT_PER_REQUEST. */
  ceiling?: number;
}

/**
 * A draft token must bring this much more per millisecond than the step's decodes alone do: the
 * cost model's error (a busy moment, a shape it has seen little of) should not make a saturated
 * step slower. Measured against the step without drafts, not the step's average with the drafts
 * granted so far: against that, the margin capped every draft where the average nears what a
 * draft token can bring (a lone Qwen2.5-Coder stream on 2 AVX2 cores: 7 tokens, at any acceptance).
 */
const DRAFT_MARGIN = 1.2;
/** Exploring is for small steps: with more streams decoding than this, a wrong guess costs them all. */
const EXPLORE_MAX_STREAMS = 2;
/** Only a draft at least this likely to be accepted is verified to explore. */
const EXPLORE_ACCEPTANCE = 0.3;
/**
 * An exploring draft is at most this many times the run its acceptance expects, 1 / (1 − a), and
 * at least 4 tokens: long enough to show what a longer draft costs, never 64 tokens of a source
 * that is right a third of the time (random-word prompts, where 3-token matches abound: SmolLM2
 * alone with speculation on ran at 0.91× of off).
 */
const EXPLORE_RUNS = 4;
/**
 * However many tokens a step is expected to bring a stream, it takes at most this many times the
 * stream's inter-token target: output may come in bursts, but not in rare ones, and a request that
 * arrives meanwhile waits no longer for the step to end.
 */
const MAX_BURST = 3;
/**
 * A draft granted this many tokens goes on to a whole micro-batch tile (TILE_DRAFT), where the
 * draft has the tokens: llama.cpp's CPU kernels take a sequence's 64 rows in one tile (flash
 * attention's GGML_FA_TILE_Q), and a run of 64-65 tokens costs less than one of 56-63 and little
 * more than one of 48 (bench/verify-cost.ts, SmolLM2-135M on 2 Zen 4 cores at position 1,000: 63
 * tokens 418 ms, 64 288 ms, 48 317 ms). Only a nearly sure draft is granted this long token by token.
 */
const TILE_ROUND_UP = 48;
/** Draft tokens that make a run a whole tile (64 rows) past its own decode token, alone or beside other streams' decode tokens. */
const TILE_DRAFT = 64;

/** The shape of `count` draft tokens verified after position `from`: each has logits, each is sampled. */
export function draftShape(from: number, count: number): StepShape {
  return { decodeTokens: 0, promptTokens: 0, attended: attendedBy(from + 1, count), draftTokens: count };
}

interface Candidate {
  request: EngineRequest;
  draft: Draft;
  acceptance: number;
  /** Draft tokens granted so far. */
  taken: number;
  /** Expected accepted tokens of the next one: acceptance^(taken+1). */
  gain: number;
  /** Tokens the step is expected to bring the stream: its own, and the draft's granted so far. */
  expected: number;
  /** What lower tiers' work may bring the step to beside a priority stream (Infinity: no limit). */
  besideMs: number;
}

/**
 * How many draft tokens each decoding stream verifies this step. A draft token costs the whole
 * step (every stream in it waits for it) what the cost model says one more verified token costs;
 * it brings acceptance^j expected tokens (the j-th of a draft counts only if all before it were
 * accepted). Tokens are granted by rounds, one a stream, priority's streams first in each round
 * and flex last, as long as each brings DRAFT_MARGIN times the tokens per millisecond of the step's decodes alone,
 * and at least the step's average so far (past that, a longer draft lowers the step's rate), and the step
 * keeps every stream's pace: no longer than each stream's inter-token target times the tokens it is
 * expected to bring it (one, for a stream without a draft), and MAX_BURST targets at most. Alone on
 * the machine, a stream with a good prediction drafts long; on a saturated one (the average
 * already high), only drafts that are nearly sure to be accepted get in, or none.
 */
export function planDrafts(
  decoding: readonly EngineRequest[],
  base: StepShape,
  limits: DraftLimits,
  cost: StepCostModel,
): Map<EngineRequest, Draft> {
  const candidates = proposals(decoding, limits).sort((a, b) => TIER_RANK[a.request.tier] - TIER_RANK[b.request.tier]);
  const byRequest = new Map(candidates.map((c) => [c.request, c]));
  const paceMs = () => Math.min(...decoding.map((r) => limits.itlMs(r) * Math.min(MAX_BURST, byRequest.get(r)?.expected ?? 1)));
  const time = cost.predict(base);
  const step: Granted = { shape: base, time, expected: decoding.length, left: Math.min(DRAFT_TOKENS_PER_STEP, limits.tokensLeft) };
  // What a draft token must bring per ms: the step's rate without drafts, with the margin.
  const floorRate = (DRAFT_MARGIN * decoding.length) / time;
  // By rounds: each open stream gets one more token while it pays, priority's first in every round and flex's last.
  let open = candidates;
  while (open.length > 0 && step.left > 0) open = grantRound(open, step, floorRate, cost, paceMs);
  for (const c of candidates) roundUpToTile(c, step, cost, paceMs);
  if (limits.explore && decoding.length <= EXPLORE_MAX_STREAMS) explore(candidates, step.shape, cost, paceMs);
  return new Map(
    candidates.filter((c) => c.taken > 0).map((c) => [c.request, { source: c.draft.source, tokens: c.draft.tokens.slice(0, c.taken) }]),
  );
}

/** The step as drafts are granted: its shape, predicted time, expected tokens, and draft tokens left. */
interface Granted {
  shape: StepShape;
  time: number;
  expected: number;
  left: number;
}

/**
 * One more draft token to each open stream that it pays for; returns the streams still open. The
 * pace is checked once the round is granted: each stream's token raises what the step brings that
 * stream, so checked one at a time, every stream was held to the pace of the others before their
 * turn (six Qwen2.5-Coder streams drafting at 99% acceptance got no draft at all once their decodes
 * alone took longer than one inter-token target). Past it, the round is undone from its end (flex
 * first), and those streams draft no more this step.
 */
function grantRound(open: readonly Candidate[], step: Granted, floorRate: number, cost: StepCostModel, paceMs: () => number): Candidate[] {
  const round: Array<{ candidate: Candidate; before: Granted; gain: number }> = [];
  let still = open.filter((c) => {
    if (step.left <= 0 || c.taken >= c.draft.tokens.length) return false;
    const withIt = addShapes(step.shape, draftShape(c.request.computed + c.taken, 1));
    const after = cost.predict(withIt);
    // It must beat the step without drafts (by the margin), not lower the step's rate, and keep
    // within what lower tiers may bring a step beside priority.
    if (c.gain < (after - step.time) * Math.max(floorRate, step.expected / step.time) || after > c.besideMs) return false;
    round.push({ candidate: c, before: { ...step }, gain: c.gain });
    Object.assign(step, { shape: withIt, time: after, expected: step.expected + c.gain, left: step.left - 1 });
    c.expected += c.gain;
    c.taken++;
    c.gain *= c.acceptance;
    return true;
  });
  while (round.length > 0 && step.time > paceMs()) {
    const { candidate: c, before, gain } = round.pop()!;
    Object.assign(step, before);
    c.taken--;
    c.gain = gain;
    c.expected -= gain;
    still = still.filter((other) => other !== c);
  }
  return still;
}

/**
 * A draft granted TILE_ROUND_UP tokens or more goes on to TILE_DRAFT, within the step's tokens,
 * the streams' pace and what lower tiers may bring (the cost model, linear in draft tokens, prices
 * the extra tokens at their full rate, so it never lets in more than the pace allows).
 */
function roundUpToTile(c: Candidate, step: Granted, cost: StepCostModel, paceMs: () => number): void {
  const more = Math.min(TILE_DRAFT, c.draft.tokens.length) - c.taken;
  if (c.taken < TILE_ROUND_UP || more <= 0 || more > step.left) return;
  const withIt = addShapes(step.shape, draftShape(c.request.computed + c.taken, more));
  const after = cost.predict(withIt);
  const gain = c.acceptance >= 1 ? more : (c.gain * (1 - c.acceptance ** more)) / (1 - c.acceptance);
  c.expected += gain;
  if (after > c.besideMs || after > paceMs()) {
    c.expected -= gain;
    return;
  }
  Object.assign(step, { shape: withIt, time: after, expected: step.expected + gain, left: step.left - more });
  c.taken += more;
  c.gain *= c.acceptance ** more;
}

/**
 * The cost model learns what drafts cost only from the drafts it sees: having decided on short
 * ones (or none, on a busy moment), it would never see a step that shows a long one pays, and the
 * cost of draft tokens is hard to tell apart from that of attention when one stream's position
 * and draft length move together. So now and then the likeliest draft is verified whole (up to
 * MAX_DRAFT_PER_REQUEST and EXPLORE_RUNS expected runs), or as much of it as the streams' pace allows.
 */
function explore(candidates: Candidate[], base: StepShape, cost: StepCostModel, paceMs: () => number): void {
  const best = candidates
    .filter((c) => c.acceptance >= EXPLORE_ACCEPTANCE)
    .sort((a, b) => TIER_RANK[a.request.tier] - TIER_RANK[b.request.tier] || b.acceptance - a.acceptance)[0];
  if (!best || best.taken >= best.draft.tokens.length) return;
  // As much of it as the pace allows, by the model's (possibly wrong) reckoning: a step of any
  // size that it has not seen teaches it something.
  const from = best.request.computed + best.taken;
  const granted = best.expected;
  const fits = (count: number) => {
    best.expected = granted + (best.gain * (1 - best.acceptance ** count)) / Math.max(1e-9, 1 - best.acceptance);
    return cost.predict(addShapes(base, draftShape(from, count))) <= Math.min(best.besideMs, paceMs());
  };
  let count = Math.min(best.draft.tokens.length - best.taken, Math.max(4, Math.ceil(EXPLORE_RUNS / Math.max(1e-9, 1 - best.acceptance))));
  while (count > 1 && !fits(count)) count = Math.floor(count / 2);
  if (fits(count)) best.taken += count;
  else best.expected = granted;
}

/** Each decoding stream's draft, as long as its token limit and its cells allow. */
function proposals(decoding: readonly EngineRequest[], limits: DraftLimits): Candidate[] {
  const candidates: Candidate[] = [];
  for (const request of decoding) {
    const speculation = request.speculation;
    // The step that samples the first token (a cached prompt's last token) is kept short: drafting
    // there would hold the first token back for the whole verification (TTFT 537 ms for 58, Qwen
    // edit replay), trading time to first token, a target of its own, for later tokens.
    if (!speculation || request.generatedCount === 0) continue;
    // The draft's tokens and the one sampled after them must fit in max_tokens and the sequence's cells.
    const most = Math.min(
      limits.ceiling ?? MAX_DRAFT_PER_REQUEST,
      request.spec.maxTokens - request.generatedCount - 1,
      limits.cellsPerSequence - request.tokens.length,
    );
    const draft = speculation.propose(request.tokens, most);
    if (!draft) continue;
    const acceptance = speculation.acceptance(draft.source);
    candidates.push({
      request,
      draft,
      acceptance,
      taken: 0,
      gain: acceptance,
      expected: 1,
      besideMs: request.tier === "priority" ? Infinity : limits.lowerMs,
    });
  }
  return candidates;
}
