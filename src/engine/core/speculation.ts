import { Drafter, type Draft, type DraftSource } from "./drafter.js";
import type { PredictionCounts, SpeculationCounts, Token } from "../types.js";

/** `auto`: every request drafts where the cost model says it pays; `off`: none does, prediction or not. */
export type SpeculationMode = "auto" | "off";

/**
 * Most draft tokens one request verifies in a step (llama-server's ngram-mod drafts up to 64). The
 * cost model and the measured acceptance decide how many of them pay: a long draft only where the
 * source has kept matching (an edit's prediction, a document quoted back).
 */
export const MAX_DRAFT_PER_REQUEST = 64;
/** Most draft tokens in one step, over all requests: the runner reserves logits for this many more outputs. */
export const DRAFT_TOKENS_PER_STEP = 128;

/** Acceptance assumed for a source before a shard has measured it. */
const PRIOR_ACCEPTANCE: Record<DraftSource, number> = { prediction: 0.8, lookup: 0.4, quote: 0.8 };
/**
 * Each verified draft position moves a request's own acceptance estimate this much of the way:
 * its acceptance *now*, over the last few dozen positions, not its average. A prediction is nearly
 * always right in the middle of a long matching stretch and often wrong just after an edit; by the
 * average, every draft would be sized for the edits (Qwen2.5-Coder edit replay: 7-token drafts,
 * accepted whole, where a 21-token one brought 18% more tokens per ms).
 */
const REQUEST_RATE_STEP = 1 / 32;
/** Each verified draft token moves the shard's acceptance rate this much of the way. */
const SHARD_RATE_STEP = 0.02;
/** One step in this many verifies its likeliest draft whole, whatever the cost model says (draft-budget.ts `explore`). */
const EXPLORE_EVERY = 32;
/**
 * A step carrying drafts that took more than this many times the cost model's prediction for it
 * overran: the model priced its drafts wrong (a machine loaded all at once, a fit gone astray: issue
 * 54's probe saw per_sampled_token_ms 160 and a request's steps run for minutes), and every stream
 * on the shard waited for them.
 */
export const OVERRUN_FACTOR = 2;
/** Each step with drafts that kept to its prediction raises the draft ceiling back by this many tokens. */
export const CEILING_GROWTH = 2;

/** Two guesses that agree token for token as far as the shorter goes. */
function agreeing(a: readonly Token[], b: readonly Token[]): boolean {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A shard's measured acceptance, per draft source: the prior of each new request's estimate, and /health's figure. */
export class ShardSpeculation {
  readonly rates: Record<DraftSource, number> = { ...PRIOR_ACCEPTANCE };
  draftTokens = 0;
  acceptedTokens = 0;
  /**
   * Most draft tokens one request verifies in a step, whatever the cost model says: an overrun step
   * halves its longest possible draft, a step on time raises it by CEILING_GROWTH (so a cost model
   * gone wrong cannot keep making long steps: they shrink geometrically while it relearns).
   */
  draftCeiling = MAX_DRAFT_PER_REQUEST;
  private steps = 0;

  constructor(readonly mode: SpeculationMode) {}

  /** Whether the next step should verify its likeliest draft whole, to keep measuring what drafts cost. */
  get exploring(): boolean {
    return this.steps % EXPLORE_EVERY === EXPLORE_EVERY - 1;
  }

  /** A step with tokens was planned. */
  planned(): void {
    this.steps++;
  }

  /** A step that verified `draftTokens` draft tokens took `ms`, where the cost model had predicted `predictedMs`. */
  stepTook(draftTokens: number, predictedMs: number, ms: number): void {
    if (draftTokens === 0) return;
    if (ms > OVERRUN_FACTOR * predictedMs) this.draftCeiling = Math.max(1, Math.floor(Math.min(this.draftCeiling, draftTokens) / 2));
    else this.draftCeiling = Math.min(MAX_DRAFT_PER_REQUEST, this.draftCeiling + CEILING_GROWTH);
  }

  /** Draft tokens accepted of those verified on this shard (null: none verified yet). */
  get acceptanceRate(): number | null {
    return this.draftTokens === 0 ? null : this.acceptedTokens / this.draftTokens;
  }

  record(source: DraftSource, trials: number, accepted: number, drafted: number): void {
    this.draftTokens += drafted;
    this.acceptedTokens += accepted;
    for (let i = 0; i < trials; i++) this.rates[source] += SHARD_RATE_STEP * ((i < accepted ? 1 : 0) - this.rates[source]);
  }
}

/**
 * One request's speculation: its drafter, its own acceptance per source (each draft position is a
 * trial when every one before it was accepted), and what it reports: prediction counts as OpenAI
 * bills them (accepted: prediction tokens in the output; rejected: prediction tokens computed and
 * thrown away) and every source's totals for /metrics.
 */
export class RequestSpeculation {
  /** Prediction draft tokens accepted (into the output) and rejected, as counted before the clamp of `prediction`. */
  private readonly predicted = { accepted: 0, rejected: 0 };
  private readonly predictionLength: number | undefined;
  readonly totals: SpeculationCounts = { drafts: 0, draftTokens: 0, acceptedTokens: 0 };
  /** The chance that a draft token from each source is accepted, given every one before it was: starts from the shard's. */
  private readonly rates: Record<DraftSource, number>;
  private readonly drafter: Drafter;
  private seen: number;
  /** The guess not drafted last time the two sources differed, and where it would have started: scored against the output. */
  private shadow: { draft: Draft; at: number } | undefined;

  constructor(
    tokens: readonly Token[],
    promptLength: number,
    prediction: readonly Token[] | undefined,
    private shard: ShardSpeculation,
  ) {
    this.drafter = new Drafter(tokens, promptLength, prediction);
    this.rates = { ...shard.rates };
    this.predictionLength = prediction?.length;
    this.seen = tokens.length;
  }

  /** The request moved to another shard: its drafts' outcomes count there. */
  moveTo(shard: ShardSpeculation): void {
    this.shard = shard;
  }

  /**
   * A draft of up to `most` tokens to follow `tokens` (the request's, as they are now): of the two
   * sources' guesses, the one expected to bring more accepted tokens by each source's acceptance
   * so far (the prediction while it holds; prompt lookup where the output has left the prediction
   * behind and repeats itself, or quotes the prompt), and the prediction where both guess the same
   * next token. Both are weighed every step, so a source that fell behind is taken up again once its
   * guess is the better bet.
   */
  propose(tokens: readonly Token[], most: number): Draft | undefined {
    this.scoreShadow(tokens);
    if (tokens.length > this.seen) this.drafter.advance(this.seen);
    this.seen = tokens.length;
    const [prediction, lookup] = this.drafter.proposals(most);
    if (!prediction || !lookup) return prediction ?? lookup;
    // The same guess as far as both go (an edit's prediction and the document it quotes in the
    // prompt): the caller's prediction is drafted, so its acceptance (and its usage counts) grow.
    if (agreeing(prediction.tokens, lookup.tokens)) return prediction;
    const [chosen, other] = this.expectedTokens(lookup) > this.expectedTokens(prediction) ? [lookup, prediction] : [prediction, lookup];
    this.shadow = { draft: other, at: tokens.length };
    return chosen;
  }

  /**
   * The guess not drafted, scored against what the output became, as if verified: its source's
   * acceptance learns without a token computed. A source that is never drafted would otherwise keep
   * its prior for good: where a looping output leaves the prediction at every turn of the loop
   * (SmolLM2's edit replay), the prediction agreed with the loop's quote up to the turn and was
   * drafted every time, and the quote that went on round the loop never was.
   */
  private scoreShadow(tokens: readonly Token[]): void {
    const shadow = this.shadow;
    if (!shadow || tokens.length <= shadow.at) return;
    this.shadow = undefined;
    const { draft, at } = shadow;
    const seen = Math.min(tokens.length - at, draft.tokens.length);
    let matched = 0;
    while (matched < seen && tokens[at + matched] === draft.tokens[matched]) matched++;
    // Judged only as far as the output goes: a token it has not reached yet is no trial.
    const trials = matched < seen ? matched + 1 : matched;
    for (let i = 0; i < trials; i++) this.rates[draft.source] += REQUEST_RATE_STEP * ((i < matched ? 1 : 0) - this.rates[draft.source]);
  }

  /** Draft tokens expected to be accepted: the j-th counts only if all before it were, a^1 + … + a^n. */
  private expectedTokens(draft: Draft): number {
    const a = this.acceptance(draft.source);
    return a >= 1 ? draft.tokens.length : (a * (1 - a ** draft.tokens.length)) / (1 - a);
  }

  /**
   * The prediction's counts as OpenAI reports them: its tokens that appeared in the output and
   * those that did not (so never more than it has, however often a part was drafted again after a
   * divergence); undefined without a prediction.
   */
  get prediction(): PredictionCounts | undefined {
    if (this.predictionLength === undefined) return undefined;
    const accepted = Math.min(this.predicted.accepted, this.predictionLength);
    return { accepted, rejected: Math.min(this.predicted.rejected, this.predictionLength - accepted) };
  }

  /** The chance that a draft token from `source` is accepted, given every one before it was. */
  acceptance(source: DraftSource): number {
    return this.rates[source];
  }

  /** A verified draft: `accepted` of its tokens matched what the model sampled (the acceptance measured, not the prediction's counts: see `deliver`). */
  settle(draft: Draft, accepted: number): void {
    const trials = Math.min(draft.tokens.length, accepted + 1);
    for (let i = 0; i < trials; i++) this.rates[draft.source] += REQUEST_RATE_STEP * ((i < accepted ? 1 : 0) - this.rates[draft.source]);
    this.shard.record(draft.source, trials, accepted, draft.tokens.length);
    this.totals.drafts++;
    this.totals.draftTokens += draft.tokens.length;
    this.totals.acceptedTokens += accepted;
  }

  /**
   * The run's token at `index` goes into the output; `accepted` of the draft's tokens matched. The
   * prediction's counts follow what is delivered: a draft token counts as accepted once it is output,
   * and the draft's unmatched rest counts as rejected once the token that diverged from it is output.
   * Where the output ends before (a stop string, max_tokens, a grammar's end), the draft tokens after
   * the end were neither output nor wrong: they count as neither.
   */
  deliver(draft: Draft, index: number, accepted: number): void {
    if (draft.source !== "prediction") return;
    if (index < accepted) this.predicted.accepted++;
    else this.predicted.rejected += draft.tokens.length - accepted;
  }
}
