import { JsonEnd } from "../json-end.js";
import { TextStream } from "../text-stream.js";
import type { SampledLogprob } from "../runner/step-protocol.js";
import type { RequestSpeculation } from "./speculation.js";
import type { GenerationEvent, FinishReason, GenerationRequest, Token, TokenAlternative, TokenLogprob } from "../types.js";

/** What post-processing needs of the vocabulary. */
export interface TokenTexts {
  pieceBytes(token: Token): Uint8Array;
  tokenText(token: Token): string;
  isEndOfGeneration(token: Token): boolean;
}

/**
 * Post-processing of one request's sampled tokens: text deltas safe to send (whole characters,
 * never part of a stop string), the end of a JSON value, the token limit, log probabilities in the
 * wire's shape. Runs on the main thread once per step for every request that sampled.
 */
export class RequestOutput {
  private readonly text: TextStream;
  private readonly jsonEnd: JsonEnd | undefined;
  private readonly logprobs: TokenLogprob[] = [];
  private reported = 0;

  constructor(
    private readonly texts: TokenTexts,
    private readonly request: GenerationRequest,
    /** Its speculation, whose counts the events carry. */
    private readonly speculation?: RequestSpeculation,
  ) {
    this.text = new TextStream(detokenizer(texts), request.stop);
    this.jsonEnd = request.constraint ? new JsonEnd() : undefined;
  }

  get completionTokens(): number {
    return this.text.tokenCount;
  }

  /** Takes a sampled token; returns the events it makes and, if generation ends with it, why. */
  accept(token: Token, logprob: SampledLogprob | null, cellsLeft: number): { events: GenerationEvent[]; finish?: FinishReason } {
    if (this.texts.isEndOfGeneration(token)) return { events: [], finish: "stop" };
    if (logprob) this.logprobs.push(this.wireLogprob(token, logprob));
    const delta = this.text.push(token);
    const events = this.textEvents(delta);
    if (this.text.hitStop || this.jsonEnd?.push(Buffer.from(this.texts.pieceBytes(token)).toString("utf8")))
      return { events, finish: "stop" };
    if (this.text.tokenCount >= this.request.maxTokens || cellsLeft <= 0) return { events, finish: "length" };
    return { events };
  }

  /** The text held back, then the finish event. */
  finish(reason: FinishReason): GenerationEvent[] {
    const events = reason === "cancelled" ? [] : this.textEvents(this.text.flush());
    const prediction = this.speculation?.prediction;
    const speculation = this.speculation && this.speculation.totals.drafts > 0 ? { ...this.speculation.totals } : undefined;
    events.push({
      type: "finish",
      reason,
      completionTokens: this.text.tokenCount,
      ...(prediction ? { prediction } : {}),
      ...(speculation ? { speculation } : {}),
    });
    return events;
  }

  private textEvents(delta: string): GenerationEvent[] {
    const logprobs = this.released();
    if (!delta && !logprobs?.length) return [];
    const prediction = this.speculation?.prediction;
    return [
      {
        type: "text",
        text: delta,
        completionTokens: this.text.tokenCount,
        ...(logprobs ? { logprobs } : {}),
        ...(prediction ? { prediction } : {}),
      },
    ];
  }

  /** The log probabilities of the tokens whose text was released since the last call. */
  private released(): TokenLogprob[] | undefined {
    if (!this.request.logprobs) return undefined;
    const count = this.text.takeReleasedTokens();
    this.reported += count;
    return this.logprobs.slice(this.reported - count, this.reported);
  }

  private wireLogprob(token: Token, sampled: SampledLogprob): TokenLogprob {
    const alternative = (id: Token, logprob: number): TokenAlternative => {
      const text = this.texts.tokenText(id);
      return { token: text, logprob, bytes: [...Buffer.from(text, "utf8")] };
    };
    return { ...alternative(token, sampled.logprob), top: sampled.top.map(([id, logprob]) => alternative(id as Token, logprob)) };
  }
}

const decoder = new TextDecoder("utf-8");

/** Generated tokens as text: their pieces' bytes concatenated; an unfinished UTF-8 character at the end decodes to U+FFFD, which TextStream waits out. */
export function detokenizer(texts: Pick<TokenTexts, "pieceBytes">): (tokens: readonly Token[]) => string {
  return (tokens) => decodeBytes(texts, tokens);
}

function decodeBytes(texts: Pick<TokenTexts, "pieceBytes">, tokens: readonly Token[]): string {
  const pieces = tokens.map((token) => texts.pieceBytes(token));
  const bytes = new Uint8Array(pieces.reduce((sum, piece) => sum + piece.length, 0));
  let at = 0;
  for (const piece of pieces) {
    bytes.set(piece, at);
    at += piece.length;
  }
  return decoder.decode(bytes);
}
