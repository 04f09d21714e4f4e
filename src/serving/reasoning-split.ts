import { THINK_CLOSE, THINK_OPEN } from "../protocol/think-tags.js";

/** What one pushed delta (or the finish) releases, and which part its tokens count toward. */
export interface SplitDelta {
  reasoning: string;
  content: string;
  /** Tokens settled by this call as reasoning (they stay pending while it is unknown which part they belong to). */
  reasoningTokens: number;
  contentTokens: number;
}

/**
 * `opening`: at the start of the output, or right after a closing tag: a `<think>` may still come.
 * `reasoning`: inside a think block. `content`: the answer; no more tags are looked for.
 */
type Phase = "opening" | "reasoning" | "content";

export interface ReasoningSplitOptions {
  /** The prompt left a `<think>` open: the output starts as reasoning. */
  startsInReasoning?: boolean;
  /** `false`: pass everything through as content (grammar-bound output cannot hold a think block). */
  enabled?: boolean;
}

/**
 * Splits a model's streamed text into reasoning (between `<think>` and `</think>`) and content, as
 * llama-server's `reasoning_format` and vLLM's reasoning parsers do. The tags may arrive split across
 * deltas in any way; text that may still be part of a tag is held back until it is known.
 *
 * A think block is recognised only at the start of the output (after whitespace) or right after
 * another one closes, so a model that merely mentions the tag in its answer keeps it in the content.
 * Whitespace around the reasoning and between `</think>` and the answer is dropped (llama.cpp does
 * the same). A think block still open when generation ends is all reasoning (vLLM's and llama.cpp's
 * reading: the output was cut while the model was thinking).
 *
 * Tokens: the tokens of a delta count as reasoning when any of its text was inside a think block
 * (the tags included), as content when it was all content, and stay pending while undecided (e.g.
 * `<thi` at the start). One delta per token is the common case, so the count is then exact; a delta
 * that carries several tokens across `</think>` counts wholly as reasoning.
 */
export class ReasoningSplitter {
  private phase: Phase;
  /** Text not yet released: the undecided start, or the tail of the reasoning that may be a tag or trailing whitespace. */
  private held = "";
  /** In `opening`: whether a think block just closed (then leading whitespace is dropped, not content). */
  private afterClose = false;
  /** In `reasoning`: whether any non-whitespace reasoning was released yet (leading whitespace is dropped). */
  private reasoningStarted = false;
  private pendingTokens = 0;
  private reasoningTotal = 0;

  constructor(options: ReasoningSplitOptions = {}) {
    this.phase = options.enabled === false ? "content" : options.startsInReasoning ? "reasoning" : "opening";
  }

  /** All tokens counted as reasoning so far. */
  get reasoningTokens(): number {
    return this.reasoningTotal;
  }

  /** Adds a text delta that took `tokens` tokens to generate. */
  push(text: string, tokens: number): SplitDelta {
    const out: SplitDelta = { reasoning: "", content: "", reasoningTokens: 0, contentTokens: 0 };
    this.pendingTokens += tokens;
    this.held += text;
    let sawReasoning = this.phase === "reasoning";
    for (let progressed = true; progressed;) {
      progressed = false;
      if (this.phase === "opening") {
        const rest = this.held.trimStart();
        if (rest.startsWith(THINK_OPEN)) {
          this.held = rest.slice(THINK_OPEN.length);
          this.phase = "reasoning";
          this.reasoningStarted = false;
          sawReasoning = progressed = true;
        } else if (!THINK_OPEN.startsWith(rest)) {
          out.content += this.afterClose ? rest : this.held;
          this.held = "";
          this.phase = "content";
        }
      } else if (this.phase === "reasoning") {
        const close = this.held.indexOf(THINK_CLOSE);
        if (close !== -1) {
          out.reasoning += this.reasoningText(this.held.slice(0, close).trimEnd());
          this.held = this.held.slice(close + THINK_CLOSE.length);
          this.phase = "opening";
          this.afterClose = progressed = true;
        } else {
          const keep = heldForClose(this.held);
          out.reasoning += this.reasoningText(this.held.slice(0, this.held.length - keep));
          this.held = this.held.slice(this.held.length - keep);
        }
      } else {
        out.content += this.held;
        this.held = "";
      }
    }
    if (sawReasoning) this.settle(out, "reasoning");
    else if (this.phase === "content") this.settle(out, "content");
    return out;
  }

  /** Releases what is held at the end of generation; `extraTokens` were generated without text (e.g. a cut stop string). */
  finish(extraTokens = 0): SplitDelta {
    const out: SplitDelta = { reasoning: "", content: "", reasoningTokens: 0, contentTokens: 0 };
    this.pendingTokens += extraTokens;
    if (this.phase === "reasoning") {
      out.reasoning = this.reasoningText(this.held.trimEnd());
      this.settle(out, "reasoning");
    } else {
      out.content = this.phase === "opening" && this.afterClose ? this.held.trimStart() : this.held;
      this.settle(out, "content");
    }
    this.held = "";
    return out;
  }

  /** Reasoning text to release, without the whitespace that opens the block. */
  private reasoningText(text: string): string {
    const out = this.reasoningStarted ? text : text.trimStart();
    if (out.length > 0) this.reasoningStarted = true;
    return out;
  }

  private settle(out: SplitDelta, part: "reasoning" | "content"): void {
    if (part === "reasoning") {
      out.reasoningTokens += this.pendingTokens;
      this.reasoningTotal += this.pendingTokens;
    } else out.contentTokens += this.pendingTokens;
    this.pendingTokens = 0;
  }
}

/**
 * How much of the end of the reasoning to hold back: a tail that may be the start of `</think>`,
 * and the whitespace before it (dropped if the block closes right after, released if more follows).
 */
function heldForClose(text: string): number {
  let keep = 0;
  for (let n = Math.min(THINK_CLOSE.length - 1, text.length); n > 0; n--) {
    if (text.endsWith(THINK_CLOSE.slice(0, n))) {
      keep = n;
      break;
    }
  }
  let end = text.length - keep;
  while (end > 0 && /\s/u.test(text[end - 1]!)) end--;
  return text.length - end;
}
