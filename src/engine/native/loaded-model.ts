import { openLlamaLibrary, type Handle, type LlamaLibrary } from "./llama-lib.js";
import type { Token } from "../types.js";

/**
 * A GGUF model loaded once per process (its weights shared by every shard's context), with what
 * the main thread needs of its vocabulary: tokenizing prompts and turning tokens back into bytes.
 */
export interface LoadedModel {
  readonly handle: Handle;
  readonly libraryDir: string;
  readonly trainContextSize: number;
  readonly vocabularySize: number;
  /** The Jinja chat template in the GGUF's metadata, if any. */
  readonly chatTemplate: string | undefined;
  readonly bosText: string;
  readonly eosText: string;
  /**
   * Special tokens written in the text (`<|im_start|>`) are recognised. `addSpecial`: BOS (and EOS)
   * where the tokenizer adds them, for a raw prompt; a rendered chat template writes its own.
   */
  tokenize(text: string, options?: { addSpecial?: boolean }): Token[];
  /** The bytes a generated token adds to the text (special tokens add none). */
  pieceBytes(token: Token): Uint8Array;
  /** The token as text, special tokens spelled out (for log probabilities). */
  tokenText(token: Token): string;
  isEndOfGeneration(token: Token): boolean;
  free(): void;
}

export function loadModel(path: string): LoadedModel {
  const lib = openLlamaLibrary();
  const params = lib.llama_model_default_params();
  params.n_gpu_layers = 0;
  const handle = lib.llama_model_load_from_file(path, params);
  if (!handle) throw new Error(`llama.cpp could not load the model file ${path} (not a GGUF it can read?)`);
  const vocab = lib.llama_model_get_vocab(handle);
  const vocabularySize = lib.llama_vocab_n_tokens(vocab);
  const pieces = new Array<Uint8Array | undefined>(vocabularySize);
  const texts = new Map<Token, string>();
  const piece = (token: Token, special: boolean) => tokenPiece(lib, vocab, token, special);
  return {
    handle,
    libraryDir: lib.libraryDir,
    trainContextSize: lib.llama_model_n_ctx_train(handle),
    vocabularySize,
    chatTemplate: lib.llama_model_chat_template(handle, null) ?? undefined,
    bosText: specialText(lib, vocab, lib.llama_vocab_bos(vocab)),
    eosText: specialText(lib, vocab, lib.llama_vocab_eos(vocab)),
    tokenize: (text, options) => tokenize(lib, vocab, text, options?.addSpecial ?? false),
    pieceBytes: (token) => (pieces[token] ??= piece(token, false)),
    tokenText(token) {
      let text = texts.get(token);
      if (text === undefined) texts.set(token, (text = Buffer.from(piece(token, true)).toString("utf8")));
      return text;
    },
    isEndOfGeneration: (token) => lib.llama_vocab_is_eog(vocab, token),
    free: () => lib.llama_model_free(handle),
  };
}

function tokenize(lib: LlamaLibrary, vocab: Handle, text: string, addSpecial: boolean): Token[] {
  const bytes = Buffer.from(text, "utf8");
  // A token covers at least one byte, plus room for special tokens the tokenizer may add.
  let out = new Int32Array(bytes.length + 8);
  let count = lib.llama_tokenize(vocab, bytes, bytes.length, out, out.length, addSpecial, true);
  if (count < 0) {
    out = new Int32Array(-count);
    count = lib.llama_tokenize(vocab, bytes, bytes.length, out, out.length, addSpecial, true);
  }
  if (count < 0) throw new Error(`llama.cpp could not tokenize a text of ${bytes.length} bytes`);
  return Array.from(out.subarray(0, count)) as Token[];
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
