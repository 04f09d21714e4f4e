import type { Token } from "../types.js";

/**
 * Where a draft came from: the caller's prediction, or the engine's own prompt lookup, on a short
 * match ("lookup") or a long one ("quote": the output is quoting its context, and what followed there
 * is nearly always what follows now). Each has its own acceptance, so a quote gets long drafts
 * where a 3-token match gets short ones.
 */
export type DraftSource = "prediction" | "lookup" | "quote";

export interface Draft {
  source: DraftSource;
  tokens: Token[];
}

/** Output tokens that must match in the prediction before drafting resumes from there after a divergence. */
const RESYNC_MATCH = 3;
/** N-gram length of prompt lookup (llama.cpp's ngram modes and vLLM's `ngram` use 2 to 4). */
const LOOKUP_NGRAM = 3;
/**
 * N-gram length of a quote: a match this long is looked up first (llama-server's ngram-simple matches
 * 12 tokens, its ngram-mod 24 and then drafts 48-64).
 */
const QUOTE_NGRAM = 12;

/**
 * One request's draft proposer (speculative decoding's "draft model", with no model): guesses the
 * tokens that follow what the request has generated, for its step to verify.
 * - From the caller's `prediction` (Predicted Outputs): a cursor follows the output through the
 *   prediction; after a divergence (an edit) it resynchronises on the last RESYNC_MATCH output
 *   tokens, at the nearest place after where it lost the thread, so the rest of the prediction is
 *   still drafted.
 * - From prompt lookup: the most recent earlier place in the prompt and output where the last
 *   QUOTE_NGRAM tokens occurred (a quote), else the last LOOKUP_NGRAM tokens, and what followed them there.
 * The caller picks between the two guesses (RequestSpeculation: the one expected to bring more tokens).
 * Pure bookkeeping over token ids; the scheduler asks it for drafts and tells it what was accepted.
 */
export class Drafter {
  /** Index in the prediction of the token expected next; -1: lost, waiting to resynchronise. */
  private cursor = 0;
  /** Where the cursor was when it was lost: resynchronising prefers the nearest place after it. */
  private lostAt = 0;
  /** The prediction's n-grams of RESYNC_MATCH tokens: hash to the positions that follow them. */
  private readonly predictionIndex = new Map<number, number[]>();
  /** Prompt and output n-grams of each length: hash to the position after their most recent occurrence. */
  private readonly lookupIndex = { lookup: new NgramIndex(LOOKUP_NGRAM), quote: new NgramIndex(QUOTE_NGRAM) };

  constructor(
    private readonly context: readonly Token[],
    private readonly promptLength: number,
    private readonly prediction: readonly Token[] = [],
  ) {
    for (let end = RESYNC_MATCH; end <= prediction.length; end++) {
      const key = hashTokens(prediction, end - RESYNC_MATCH, end);
      const positions = this.predictionIndex.get(key);
      if (positions) positions.push(end);
      else this.predictionIndex.set(key, [end]);
    }
    if (prediction.length === 0) this.cursor = -1;
  }

  /** The tokens the output was given since the last call (in order): moves the prediction's cursor. */
  advance(from: number): void {
    for (let at = Math.max(from, this.promptLength); at < this.context.length; at++) {
      if (this.cursor >= 0 && this.prediction[this.cursor] === this.context[at]) this.cursor++;
      else if (this.cursor >= 0) {
        this.lostAt = this.cursor;
        this.cursor = -1;
      }
      if (this.cursor < 0) this.resync(at + 1);
    }
  }

  /** Each source's guess of up to `most` tokens (undefined where it has none): the prediction's, then prompt lookup's. */
  proposals(most: number): [prediction: Draft | undefined, lookup: Draft | undefined] {
    if (most <= 0) return [undefined, undefined];
    const fromPrediction: Draft | undefined = this.followingPrediction
      ? { source: "prediction", tokens: this.prediction.slice(this.cursor, this.cursor + most) }
      : undefined;
    const quoted = this.lookupIndex.quote.find(this.context);
    if (quoted !== undefined) return [fromPrediction, { source: "quote", tokens: this.quoteFrom(quoted, most) }];
    const found = this.lookupIndex.lookup.find(this.context);
    const tokens = found === undefined ? [] : this.context.slice(found, Math.min(found + most, this.context.length));
    return [fromPrediction, tokens.length > 0 ? { source: "lookup", tokens } : undefined];
  }

  /**
   * What followed the quoted place, `most` tokens of it. Where the quote runs into the context's end
   * (the output quotes itself: a loop with a period of context.length − found), it goes on with its
   * own tokens, as an LZ77 copy overlaps its source: a loop's draft is as long as asked, not one
   * period (SmolLM2's edit replay looped in periods of 17-56 tokens, each drafted and accepted whole
   * a period at a time), as llama-server's ngram-mod drafts a loop token by token from its own guesses.
   */
  private quoteFrom(found: number, most: number): Token[] {
    const tokens: Token[] = [];
    const period = this.context.length - found;
    for (let i = 0; i < most; i++) tokens.push(i < period ? this.context[found + i]! : tokens[i - period]!);
    return tokens;
  }

  /** Whether the prediction still has tokens to draft. */
  get followingPrediction(): boolean {
    return this.cursor >= 0 && this.cursor < this.prediction.length;
  }

  /** Finds the last RESYNC_MATCH output tokens (ending before `end`) in the prediction. */
  private resync(end: number): void {
    if (end - this.promptLength < RESYNC_MATCH) return;
    const positions = this.predictionIndex.get(hashTokens(this.context, end - RESYNC_MATCH, end));
    if (!positions) return;
    let best = -1;
    for (const position of positions) {
      if (!sameTokens(this.prediction, position - RESYNC_MATCH, this.context, end - RESYNC_MATCH, RESYNC_MATCH)) continue;
      // The nearest place at or after where the thread was lost; else the last one before it.
      if (position >= this.lostAt) {
        best = position;
        break;
      }
      best = position;
    }
    if (best >= 0) this.cursor = best;
  }
}

/** N-grams of one length of a growing context: each to the position after its most recent occurrence. */
class NgramIndex {
  private readonly positions = new Map<number, number>();
  /** Tokens of the context (prompt, then output) already indexed. */
  private indexed = 0;

  constructor(private readonly n: number) {}

  /** The position after the most recent earlier occurrence of the context's last n tokens. */
  find(context: readonly Token[]): number | undefined {
    const { n } = this;
    const length = context.length;
    if (length <= n) return undefined;
    // Index every n-gram that has a token after it (the last one has none yet).
    for (; this.indexed + n < length; this.indexed++)
      this.positions.set(hashTokens(context, this.indexed, this.indexed + n), this.indexed + n);
    const found = this.positions.get(hashTokens(context, length - n, length));
    if (found === undefined || !sameTokens(context, found - n, context, length - n, n)) return undefined;
    return found;
  }
}

/** A 52-bit hash of tokens[from, to): a collision only costs a match, which is checked. */
function hashTokens(tokens: readonly Token[], from: number, to: number): number {
  let high = 0x811c9dc5;
  let low = 0x01000193;
  for (let i = from; i < to; i++) {
    high = Math.imul(high ^ tokens[i]!, 0x01000193) >>> 0;
    low = Math.imul(low ^ tokens[i]!, 0x5bd1e995) >>> 0;
  }
  return (high & 0xfffff) * 0x100000000 + low;
}

function sameTokens(a: readonly Token[], aFrom: number, b: readonly Token[], bFrom: number, count: number): boolean {
  if (aFrom < 0 || bFrom < 0) return false;
  for (let i = 0; i < count; i++) if (a[aFrom + i] !== b[bFrom + i]) return false;
  return true;
}
