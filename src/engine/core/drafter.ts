import type { Token } from "../types.js";

/** Where a draft came from: the caller's prediction, or the engine's own prompt lookup. */
export type DraftSource = "prediction" | "lookup";

export interface Draft {
  source: DraftSource;
  tokens: Token[];
}

/** Output tokens that must match in the prediction before drafting resumes from there after a divergence. */
const RESYNC_MATCH = 3;
/** N-gram length of prompt lookup (llama.cpp's ngram modes and vLLM's `ngram` use 2 to 4). */
const LOOKUP_NGRAM = 3;

/**
 * One request's draft proposer (speculative decoding's "draft model", with no model): guesses the
 * tokens that follow what the request has generated, for its step to verify.
 * - From the caller's `prediction` (Predicted Outputs): a cursor follows the output through the
 *   prediction; after a divergence (an edit) it resynchronises on the last RESYNC_MATCH output
 *   tokens, at the nearest place after where it lost the thread, so the rest of the prediction is
 *   still drafted.
 * - From prompt lookup: the most recent earlier place in the prompt and output where the last
 *   LOOKUP_NGRAM tokens occurred, and what followed them there.
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
  /** Prompt and output n-grams: hash to the position after their most recent occurrence. */
  private readonly lookupIndex = new Map<number, number>();
  /** Tokens of the context (prompt, then output) already in lookupIndex. */
  private indexed = 0;

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
    const fromPrediction: Draft | undefined = this.followingPrediction ? { source: "prediction", tokens: this.prediction.slice(this.cursor, this.cursor + most) } : undefined;
    const found = this.lookup();
    const tokens = found === undefined ? [] : this.context.slice(found, Math.min(found + most, this.context.length));
    return [fromPrediction, tokens.length > 0 ? { source: "lookup", tokens } : undefined];
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

  /** The position after the most recent earlier occurrence of the context's last LOOKUP_NGRAM tokens. */
  private lookup(): number | undefined {
    const length = this.context.length;
    if (length <= LOOKUP_NGRAM) return undefined;
    // Index every n-gram that has a token after it (the last one has none yet).
    for (; this.indexed + LOOKUP_NGRAM < length; this.indexed++) {
      this.lookupIndex.set(hashTokens(this.context, this.indexed, this.indexed + LOOKUP_NGRAM), this.indexed + LOOKUP_NGRAM);
    }
    const found = this.lookupIndex.get(hashTokens(this.context, length - LOOKUP_NGRAM, length));
    if (found === undefined || !sameTokens(this.context, found - LOOKUP_NGRAM, this.context, length - LOOKUP_NGRAM, LOOKUP_NGRAM)) return undefined;
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
