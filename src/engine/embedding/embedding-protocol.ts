/** Messages between the embedding host (main thread) and its runner thread. */

export interface EmbeddingRunnerInit {
  libraryDir: string;
  model: number | bigint;
  /** Tokens in one llama_decode; every input must fit (non-causal attention sees a whole input at once). */
  batchTokens: number;
  /** Inputs in one llama_decode (llama.cpp's LLAMA_MAX_SEQ is 256). */
  batchSequences: number;
  threads: number;
}

/** An ONNX Runtime runner (onnx-worker.ts): the model's ONNX graph, with inputs of any length in one batch. */
export interface OnnxRunnerInit {
  modelPath: string;
  threads: number;
  /** A token id the warm-up runs on (the model's CLS). */
  warmUpToken: number;
}

/** One batch: each input's token ids (CLS and SEP included), concatenated, with each input's length. */
export interface EmbedMessage {
  type: "embed";
  tokens: Int32Array;
  lengths: number[];
}

/** Each input's pooled embedding, normalised to unit length, `dimensions` floats each, in input order. */
export interface EmbedReply {
  type: "embedded";
  vectors: Float32Array;
  decodeMs: number;
}

export interface EmbedFailure {
  type: "failed";
  message: string;
}
