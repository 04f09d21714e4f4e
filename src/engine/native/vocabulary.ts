import { SpecialTextSplitter } from "../special-split.js";
import type { Token } from "../types.js";
import type { Handle, LlamaLibrary } from "./llama-lib.js";

/** A model's vocabulary: what the main thread and the prompt workers need to tokenize and detokenize. */
export interface Vocabulary {
  readonly size: number;
  readonly bosText: string;
  /** The BOS token, if the model has one (whether or not its tokenizer adds it). */
  readonly bosToken: Token | undefined;
  readonly eosText: string;
  /**
   * The most UTF-8 bytes of a prompt one token stands for (its longest piece, special tokens
   * spelled out), so a text of B bytes is at least B / maxTokenBytes tokens. Infinity for the
   * tokenizers that may drop or fold text (WordPiece, Unigram), where no such bound holds.
   */
  readonly maxTokenBytes: number;
  /**
   * The most ASCII letters and digits one token's piece holds (25 for SmolLM2, against 81 bytes of
   * a newline and spaces): a text with A of them is at least A / maxTokenAlnumBytes tokens, a far
   * tighter bound for ordinary text. Infinity where maxTokenBytes is.
   */
  readonly maxTokenAlnumBytes: number;
  /**
   * Special tokens written in the text (`<|im_start|>`) are recognised. `addSpecial`: BOS (and EOS)
   * where the tokenizer adds them, for a raw prompt; a rendered chat template writes its own.
   * Takes time in proportion to the text's length (see special-split.ts).
   */
  tokenize(text: string, options?: { addSpecial?: boolean }): Token[];
  /** The bytes a generated token adds to the text (special tokens add none). */
  pieceBytes(token: Token): Uint8Array;
  /** The token as text, special tokens spelled out (for log probabilities). */
  tokenText(token: Token): string;
  /** Tokens back into text as the tokenizer writes it (a leading space prefix removed), special tokens spelled out. */
  detokenize(tokens: readonly Token[]): string;
  isEndOfGeneration(token: Token): boolean;
}

// llama.h: enum llama_vocab_type, enum llama_token_attr.
const VOCAB_SPM = 1;
const VOCAB_BPE = 2;
const ATTR_UNKNOWN = 1 << 0;
const ATTR_CONTROL = 1 << 3;
const ATTR_USER_DEFINED = 1 << 4;
const ATTR_LSTRIP = 1 << 7;
const ATTR_RSTRIP = 1 << 8;

/** The vocabulary of a loaded model (`vocab` from llama_model_get_vocab); `bounds`: also find maxTokenBytes (one pass over the vocabulary). */
export function openVocabulary(lib: LlamaLibrary, vocab: Handle, { bounds = true } = {}): Vocabulary {
  const size = lib.llama_vocab_n_tokens(vocab);
  const type = lib.llama_vocab_type(vocab);
  const pieces = new Array<Uint8Array | undefined>(size);
  const texts = new Map<Token, string>();
  const piece = (token: Token, special: boolean) => tokenPiece(lib, vocab, token, special);
  // Only the tokenizers that keep every byte of the text (SentencePiece BPE and byte-level BPE)
  // can be cut at special tokens and bounded by piece length; others tokenize whole, unbounded.
  const keepsBytes = type === VOCAB_SPM || type === VOCAB_BPE;
  const specials = keepsBytes ? specialTexts(lib, vocab, size) : [];
  const splitter = new SpecialTextSplitter(specials);
  const special = {
    addBos: lib.llama_vocab_get_add_bos(vocab),
    addEos: lib.llama_vocab_get_add_eos(vocab),
    bos: lib.llama_vocab_bos(vocab),
    eos: lib.llama_vocab_eos(vocab),
  };
  return {
    size,
    bosText: specialText(lib, vocab, special.bos),
    bosToken: special.bos < 0 ? undefined : (special.bos as Token),
    eosText: specialText(lib, vocab, special.eos),
    ...(keepsBytes && bounds ? longestPiece(lib, vocab, size, specials) : { maxTokenBytes: Infinity, maxTokenAlnumBytes: Infinity }),
    tokenize(text, options) {
      const addSpecial = options?.addSpecial ?? false;
      const bytes = Buffer.from(text, "utf8");
      const cuts = keepsBytes ? splitter.cuts(bytes) : [];
      if (cuts.length === 0) return Array.from(tokenizeBytes(lib, vocab, bytes, addSpecial)) as Token[];
      const out: Token[] = [];
      if (addSpecial && special.addBos) out.push(special.bos as Token);
      [0, ...cuts].forEach((from, i) => {
        for (const token of tokenizeBytes(lib, vocab, bytes.subarray(from, cuts[i] ?? bytes.length), false)) out.push(token as Token);
      });
      if (addSpecial && special.addEos) out.push(special.eos as Token);
      return out;
    },
    pieceBytes: (token) => (pieces[token] ??= piece(token, false)),
    tokenText(token) {
      let text = texts.get(token);
      if (text === undefined) texts.set(token, (text = Buffer.from(piece(token, true)).toString("utf8")));
      return text;
    },
    isEndOfGeneration: (token) => lib.llama_vocab_is_eog(vocab, token),
    detokenize: (tokens) => detokenizeAll(lib, vocab, Int32Array.from(tokens)),
  };
}

/** The texts llama.cpp looks for in a prompt with parse_special: control, user-defined and unknown tokens. */
function specialTexts(lib: LlamaLibrary, vocab: Handle, size: number) {
  const out: { bytes: Uint8Array; stripsSpaces: boolean }[] = [];
  for (let token = 0; token < size; token++) {
    const attr = lib.llama_vocab_get_attr(vocab, token);
    if (!(attr & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))) continue;
    out.push({
      bytes: Buffer.from(lib.llama_vocab_get_text(vocab, token), "utf8"),
      stripsSpaces: (attr & (ATTR_LSTRIP | ATTR_RSTRIP)) !== 0,
    });
  }
  return out;
}

function longestPiece(
  lib: LlamaLibrary,
  vocab: Handle,
  size: number,
  specials: readonly { bytes: Uint8Array }[],
): { maxTokenBytes: number; maxTokenAlnumBytes: number } {
  let longest = Math.max(1, ...specials.map((s) => s.bytes.length));
  let alnum = Math.max(1, ...specials.map((s) => asciiAlnumBytes(s.bytes)));
  let buffer = Buffer.alloc(256);
  for (let token = 0; token < size; token++) {
    let length = lib.llama_token_to_piece(vocab, token, buffer, buffer.length, 0, true);
    if (length < 0) {
      buffer = Buffer.alloc(-length);
      length = lib.llama_token_to_piece(vocab, token, buffer, buffer.length, 0, true);
    }
    longest = Math.max(longest, length);
    alnum = Math.max(alnum, asciiAlnumBytes(buffer.subarray(0, length)));
  }
  return { maxTokenBytes: longest, maxTokenAlnumBytes: alnum };
}

/** ASCII letters and digits in UTF-8 bytes (no byte of a multi-byte character is one). */
export function asciiAlnumBytes(bytes: Uint8Array): number {
  let count = 0;
  for (const b of bytes) if ((b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122)) count++;
  return count;
}

function tokenizeBytes(lib: LlamaLibrary, vocab: Handle, bytes: Buffer, addSpecial: boolean): Int32Array {
  // A token covers at least one byte, plus room for special tokens the tokenizer may add.
  let out = new Int32Array(bytes.length + 8);
  let count = lib.llama_tokenize(vocab, bytes, bytes.length, out, out.length, addSpecial, true);
  if (count < 0) {
    out = new Int32Array(-count);
    count = lib.llama_tokenize(vocab, bytes, bytes.length, out, out.length, addSpecial, true);
  }
  if (count < 0) throw new Error(`llama.cpp could not tokenize a text of ${bytes.length} bytes`);
  return out.subarray(0, count);
}

function detokenizeAll(lib: LlamaLibrary, vocab: Handle, tokens: Int32Array): string {
  let out = Buffer.alloc(tokens.length * 8 + 16);
  let length = lib.llama_detokenize(vocab, tokens, tokens.length, out, out.length, false, true);
  if (length < 0) {
    out = Buffer.alloc(-length);
    length = lib.llama_detokenize(vocab, tokens, tokens.length, out, out.length, false, true);
  }
  if (length < 0) throw new Error(`llama.cpp could not detokenize ${tokens.length} tokens`);
  return out.subarray(0, length).toString("utf8");
}

function tokenPiece(lib: LlamaLibrary, vocab: Handle, token: Token, special: boolean): Uint8Array {
  let buffer = Buffer.alloc(64);
  let length = lib.llama_token_to_piece(vocab, token, buffer, buffer.length, 0, special);
  if (length < 0) {
    buffer = Buffer.alloc(-length);
    length = lib.llama_token_to_piece(vocab, token, buffer, buffer.length, 0, special);
  }
  return new Uint8Array(buffer.subarray(0, Math.max(0, length)));
}

function specialText(lib: LlamaLibrary, vocab: Handle, token: number): string {
  return token < 0 ? "" : Buffer.from(tokenPiece(lib, vocab, token as Token, true)).toString("utf8");
}
