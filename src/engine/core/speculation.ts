import { Drafter, type Draft, type DraftSource } from "./drafter.js";
import type { PredictionCounts, SpeculationCounts, Token } from "../types.js";

/** `auto`: every request drafts where the cost model says it pays; `off`: none does, prediction or not. */
export type SpeculationMode = "auto" | "off";

/** Most draft tokens one request verifies in a step (llama.cpp's --draft-max default). */
export const MAX_DRAFT_PER_REQUEST = 16;
/** Most draft tokens in one step, over all requests: the runner reserves logits for this many more outputs. */
export const DRAFT_TOKENS_PER_STEP = 48;

/** Acceptance assumed for a source before a shard has measured it. */
const PRIOR_ACCEPTANCE: Record<DraftSource, number> = { prediction: 0.8, lookup: 0.4 };
/** Weight (in draft tokens) of the shard's acceptance rate in a request's own estimate. */
const PRIOR_WEIGHT = 4;
/** Each verified draft token moves the shard's acceptance rate this much of the way. */
const SHARD_RATE_STEP = 0.02;
/** One step in this many verifies its likeliest draft whole, whatever the cost model says (draft-budget.ts `explore`). */
const EXPLORE_EVERY = 32;

/** A shard's measured acceptance, per draft source: the prior of each new request's estimate, and /health's figure. */
export class ShardSpeculation {
  readonly rates: Record<DraftSource, number> = { ...PRIOR_ACCEPTANCE };
  draftTokens = 0;
  acceptedTokens = 0;
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
  private readonly trials: Record<DraftSource, number> = { prediction: 0, lookup: 0 };
  private readonly accepted: Record<DraftSource, number> = { prediction: 0, lookup: 0 };
  private readonly drafter: Drafter;
  private seen: number;
  private lastSource: DraftSource | undefined;

  constructor(
    tokens: readonly Token[],
    promptLength: number,
    prediction: readonly Token[] | undefined,
    private readonly shard: ShardSpeculation,
  ) {
    this.drafter = new Drafter(tokens, promptLength, prediction);
    this.predictionLength = prediction?.length;
    this.seen = tokens.length;
  }

  /**
   * A draft of up to `most` tokens to follow `tokens` (the request's, as they are now): from the
   * source accepted more so far (the prediction while it holds; prompt lookup where the output has
   * left the prediction behind and repeats itself), else from the other.
   */
  propose(tokens: readonly Token[], most: number): Draft | undefined {
    if (tokens.length > this.seen) this.drafter.advance(this.seen);
    this.seen = tokens.length;
    return this.drafter.propose(most, this.acceptance("lookup") > this.acceptance("prediction") ? "lookup" : "prediction");
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
    return (this.accepted[source] + PRIOR_WEIGHT * this.shard.rates[source]) / (this.trials[source] + PRIOR_WEIGHT);
  }

  /** A verified draft: `accepted` of its tokens matched what the model sampled. */
  settle(draft: Draft, accepted: number): void {
    const trials = Math.min(draft.tokens.length, accepted + 1);
    this.trials[draft.source] += trials;
    this.accepted[draft.source] += accepted;
    this.shard.record(draft.source, trials, accepted, draft.tokens.length);
    this.totals.drafts++;
    this.totals.draftTokens += draft.tokens.length;
    this.totals.acceptedTokens += accepted;
    this.lastSource = draft.source;
    if (draft.source === "prediction") {
      this.predicted.accepted += accepted;
      this.predicted.rejected += draft.tokens.length - accepted;
    }
  }

  /**
   * The output ended `count` tokens before the end of the last draft's accepted run: those were
   * computed and are not in the output, so for the prediction they count as rejected.
   */
  undeliver(count: number): void {
    if (count <= 0 || this.lastSource !== "prediction") return;
    this.predicted.accepted -= count;
    this.predicted.rejected += count;
  }
}
