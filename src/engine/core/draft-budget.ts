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
 * accepted). Tokens are granted one a stream at a time, priority's streams first and flex last, as
 * long as each brings DRAFT_MARGIN times the tokens per millisecond of the step's decodes alone,
 * and at least the step's average so far (past that, a longer draft lowers the step's rate), and the step
 * keeps every stream's pace: no longer than each stream's inter-token target times the tokens it is
 * expected to bring it (one, for a stream without a draft), and MAX_BURST targets at most. Alone on
 * the machine, a stream with a good prediction drafts long; on a saturated one (the average
 * already high), only drafts that are nearly sure to be accepted get in, or none.
 */
export function planDrafts(decoding: readonly EngineRequest[], base: StepShape, limits: DraftLimits, cost: StepCostModel): Map<EngineRequest, Draft> {
  const candidates = proposals(decoding, limits);
  const byRequest = new Map(candidates.map((c) => [c.request, c]));
  const paceMs = () => Math.min(...decoding.map((r) => limits.itlMs(r) * Math.min(MAX_BURST, byRequest.get(r)?.expected ?? 1)));
  let shape = base;
  let time = cost.predict(shape);
  let expected = decoding.length;
  // What a draft token must bring per ms: the step's rate without drafts, with the margin.
  const floorRate = (DRAFT_MARGIN * decoding.length) / time;
  let left = Math.min(DRAFT_TOKENS_PER_STEP, limits.tokensLeft);
  for (const rank of [...new Set(candidates.map((c) => TIER_RANK[c.request.tier]))].sort((a, b) => a - b)) {
    let open = candidates.filter((c) => TIER_RANK[c.request.tier] === rank);
    // By rounds: each open stream of the tier gets one more token, while it pays.
    while (open.length > 0 && left > 0) {
      open = open.filter((c) => {
        if (left <= 0 || c.taken >= c.draft.tokens.length) return false;
        const withIt = addShapes(shape, draftShape(c.request.computed + c.taken, 1));
        const after = cost.predict(withIt);
        // It must beat the step without drafts (by the margin) and not lower the step's rate.
        if (c.gain < (after - time) * Math.max(floorRate, expected / time)) return false;
        c.expected += c.gain;
        if (after > Math.min(c.besideMs, paceMs())) {
          c.expected -= c.gain;
          return false;
        }
        [shape, time, expected, left] = [withIt, after, expected + c.gain, left - 1];
        c.taken++;
        c.gain *= c.acceptance;
        return true;
      });
    }
  }
  if (limits.explore && decoding.length <= EXPLORE_MAX_STREAMS) explore(candidates, shape, cost, paceMs);
  return new Map(candidates.filter((c) => c.taken > 0).map((c) => [c.request, { source: c.draft.source, tokens: c.draft.tokens.slice(0, c.taken) }]));
}

/**
 * The cost model learns what drafts cost only from the drafts it sees: having decided on short
 * ones (or none, on a busy moment), it would never see a step that shows a long one pays, and the
 * cost of draft tokens is hard to tell apart from that of attention when one stream's position
 * and draft length move together. So now and then the likeliest draft is verified whole (up to
 * MAX_DRAFT_PER_REQUEST and EXPLORE_RUNS expected runs), or as much of it as the streams' pace allows.
 */
function explore(candidates: Candidate[], base: StepShape, cost: StepCostModel, paceMs: () => number): void {
  const best = candidates.filter((c) => c.acceptance >= EXPLORE_ACCEPTANCE).sort((a, b) => TIER_RANK[a.request.tier] - TIER_RANK[b.request.tier] || b.acceptance - a.acceptance)[0];
  if (!best || best.taken >= best.draft.tokens.length) return;
  // As much of it as the pace allows, by the model's (possibly wrong) reckoning: a step of any
  // size that it has not seen teaches it something.
  const from = best.request.computed + best.taken;
  const granted = best.expected;
  const fits = (count: number) => {
    best.expected = granted + best.gain * (1 - best.acceptance ** count) / Math.max(1e-9, 1 - best.acceptance);
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
    const most = Math.min(MAX_DRAFT_PER_REQUEST, request.spec.maxTokens - request.generatedCount - 1, limits.cellsPerSequence - request.tokens.length);
    const draft = speculation.propose(request.tokens, most);
    if (!draft) continue;
    const acceptance = speculation.acceptance(draft.source);
    candidates.push({ request, draft, acceptance, taken: 0, gain: acceptance, expected: 1, besideMs: request.tier === "priority" ? Infinity : limits.lowerMs });
  }
  return candidates;
}
