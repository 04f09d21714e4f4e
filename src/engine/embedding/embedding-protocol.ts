/** Messages between the embedding host (main thread) and its runner thread. */
import { float32JsonCapacity, writeFloat32Json } from "../../protocol/float32-json.js";

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
  /** Also write each vector's JSON text (some request in the batch answers with floats). */
  json: boolean;
}

/** Each input's pooled embedding, normalised to unit length, `dimensions` floats each, in input order. */
export interface EmbedReply {
  type: "embedded";
  vectors: Float32Array;
  /** Each vector's JSON array text, ASCII, one after another (asked for with `json`). */
  json?: VectorsJson;
  decodeMs: number;
}

export interface VectorsJson {
  bytes: Uint8Array;
  /** Where each vector's text ends in `bytes`. */
  ends: Int32Array;
}

/**
 * The vectors' JSON text, written on the runner thread: the answer's floats were the costliest
 * part of an embeddings request on the main thread, which serves every request (protocol/float32-json.ts).
 */
export function vectorsJson(vectors: Float32Array, dimensions: number): VectorsJson {
  const count = vectors.length / dimensions;
  const bytes = new Uint8Array(count * float32JsonCapacity(dimensions));
  const ends = new Int32Array(count);
  let at = 0;
  for (let i = 0; i < count; i++) ends[i] = at = writeFloat32Json(vectors.subarray(i * dimensions, (i + 1) * dimensions), bytes, at);
  return { bytes, ends };
}

/** What a reply's buffers are, to transfer them rather than copy them. */
export function transferList(reply: EmbedReply): ArrayBuffer[] {
  const buffers = [reply.vectors.buffer as ArrayBuffer];
  if (reply.json) buffers.push(reply.json.bytes.buffer as ArrayBuffer, reply.json.ends.buffer as ArrayBuffer);
  return buffers;
}

export interface EmbedFailure {
  type: "failed";
  message: string;
}
