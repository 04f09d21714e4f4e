import type { Token } from "./types.js";

type Detokenize = (tokens: readonly Token[], lastTokens: readonly Token[]) => string;

const REPLACEMENT_CHAR = "\uFFFD";
/** Tokens of context passed to the detokenizer so word-initial spaces render as they would mid-text. */
const CONTEXT_TOKENS = 4;

/**
 * Turns generated tokens into text deltas that are safe to send: never half a UTF-8 character, never
 * any part of a stop string. Text is held back while it could still be the start of a stop string or
 * while its last token ends inside a multi-byte character.
 */
export class TextStream {
  private readonly tokens: Token[] = [];
  /** Tokens before this index are already decoded into `decoded`. */
  private decodedUpTo = 0;
  private decoded = "";
  /** Characters of `decoded` already handed out. */
  private emitted = 0;
  private stopped = false;
  /** For each decoded run of tokens: the token count after it and where its text starts and ends in `decoded`. */
  private readonly segments: Array<{ tokenEnd: number; charStart: number; charEnd: number }> = [];
  /** Tokens already reported by `takeReleasedTokens`. */
  private reportedTokens = 0;

  constructor(
    private readonly detokenize: Detokenize,
    private readonly stopStrings: readonly string[],
  ) {}

  get tokenCount(): number {
    return this.tokens.length;
  }

  get hitStop(): boolean {
    return this.stopped;
  }

  /** Adds one token; returns the text that may be sent now (possibly empty). */
  push(token: Token): string {
    if (this.stopped) return "";
    this.tokens.push(token);
    const pending = this.tokens.slice(this.decodedUpTo);
    const context = this.tokens.slice(Math.max(0, this.decodedUpTo - CONTEXT_TOKENS), this.decodedUpTo);
    const piece = this.detokenize(pending, context);
    if (piece.endsWith(REPLACEMENT_CHAR)) return ""; // wait for the rest of the character
    this.append(piece);
    return this.release(false);
  }

  /** Releases whatever was held back, at the end of generation. */
  flush(): string {
    if (this.stopped) return "";
    const pending = this.tokens.slice(this.decodedUpTo);
    if (pending.length > 0) {
      const context = this.tokens.slice(Math.max(0, this.decodedUpTo - CONTEXT_TOKENS), this.decodedUpTo);
      this.append(this.detokenize(pending, context).replace(/\uFFFD+$/u, ""));
    }
    return this.release(true);
  }

  /**
   * How many more tokens have had their text released since the last call. A token counts as
   * released once all of its text has been handed out; when a stop string cuts generation, the
   * tokens whose text was partly handed out count too, and those wholly inside the stop string never do.
   */
  takeReleasedTokens(): number {
    let released = this.reportedTokens;
    for (const segment of this.segments) {
      if (segment.tokenEnd <= released) continue;
      const out = segment.charEnd <= this.emitted || (this.stopped && segment.charStart < this.emitted);
      if (!out) break;
      released = segment.tokenEnd;
    }
    const count = released - this.reportedTokens;
    this.reportedTokens = released;
    return count;
  }

  private append(piece: string): void {
    this.segments.push({ tokenEnd: this.tokens.length, charStart: this.decoded.length, charEnd: this.decoded.length + piece.length });
    this.decoded += piece;
    this.decodedUpTo = this.tokens.length;
  }

  private release(final: boolean): string {
    const stopAt = this.firstStopMatch();
    if (stopAt !== -1) {
      this.stopped = true;
      const out = this.decoded.slice(this.emitted, stopAt);
      this.emitted = stopAt;
      return out;
    }
    const safeEnd = final ? this.decoded.length : this.decoded.length - this.heldForStop();
    if (safeEnd <= this.emitted) return "";
    const out = this.decoded.slice(this.emitted, safeEnd);
    this.emitted = safeEnd;
    return out;
  }

  private firstStopMatch(): number {
    let first = -1;
    // A match cannot start in text already emitted: text is released only once it cannot begin a stop string.
    for (const stop of this.stopStrings) {
      const at = this.decoded.indexOf(stop, this.emitted);
      if (at !== -1 && (first === -1 || at < first)) first = at;
    }
    return first;
  }

  /** Length of the longest tail of the decoded text that is a proper prefix of some stop string. */
  private heldForStop(): number {
    let held = 0;
    for (const stop of this.stopStrings) {
      for (let n = Math.min(stop.length - 1, this.decoded.length - this.emitted); n > held; n--) {
        if (this.decoded.endsWith(stop.slice(0, n))) {
          held = n;
          break;
        }
      }
    }
    return held;
  }
}
