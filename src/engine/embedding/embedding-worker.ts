import { parentPort, workerData } from "node:worker_threads";
import koffi from "koffi";
import { openLlamaLibrary, type Handle } from "../native/llama-lib.js";
import {
  transferList,
  vectorsJson,
  type EmbedFailure,
  type EmbedMessage,
  type EmbedReply,
  type EmbeddingRunnerInit,
} from "./embedding-protocol.js";

/**
 * The embedding runner: llama.cpp contexts (two: see FLASH_ATTENTION_MIN_TOKENS) with embeddings on
 * and the model's own pooling (mean for sentence-transformers BERTs), on this worker thread. Each
 * message is one batch: every input on its own sequence, all of them in one llama_decode, attention
 * non-causal within each input (the model's GGUF says so), then one pooled vector read per sequence.
 */
const init = workerData as EmbeddingRunnerInit;
const lib = openLlamaLibrary(init.libraryDir, { quietLogs: false });
const dimensions = lib.llama_model_n_embd(init.model as Handle);
const pool = lib.newThreadpool(init.threads);
/**
 * Batches under FLASH_ATTENTION_MIN_TOKENS run on a context without flash attention, larger ones on
 * a context with it. ggml's CPU flash attention tiles its work only from 64 query rows up; below
 * that it takes a row-at-a-time path that cost more than the rest of the model (one sequence of 63
 * tokens: 38.5 ms, against 20.8 ms without flash attention and 18.2 ms for 65 tokens with it; 22
 * tokens: 8.1 against 5.8 ms; all-MiniLM-L6-v2 Q8_0, 2 threads, ggml's zen4 kernels, Intel Xeon).
 * From 64 up it is the faster one, and far faster with many inputs, whose cross-input attention it
 * skips where the plain path computes it all and masks it (36 inputs of 14 tokens: 125 against 329 ms).
 */
const FLASH_ATTENTION_MIN_TOKENS = 64;
const small = createContext(Math.min(FLASH_ATTENTION_MIN_TOKENS, init.batchTokens), false);
const large = createContext(init.batchTokens, true);
const batchValue = lib.llama_batch_init(init.batchTokens, 0, 1);
const batch = {
  token: new Int32Array(koffi.view(batchValue.token, init.batchTokens * 4)),
  pos: new Int32Array(koffi.view(batchValue.pos, init.batchTokens * 4)),
  nSeq: new Int32Array(koffi.view(batchValue.n_seq_id, init.batchTokens * 4)),
  seq: Array.from(new BigUint64Array(koffi.view(batchValue.seq_id, init.batchTokens * 8)), (p) => new Int32Array(koffi.view(p, 4))),
  output: new Int8Array(koffi.view(batchValue.logits, init.batchTokens)),
};

/** A context of `tokens` tokens a decode; flash attention off, or llama.cpp's choice (on wherever the backend has it). */
function createContext(tokens: number, flashAttention: boolean): Handle {
  const params = lib.llama_context_default_params();
  params.n_ctx = tokens;
  params.n_batch = tokens;
  params.n_ubatch = tokens;
  params.n_seq_max = Math.min(init.batchSequences, tokens);
  params.n_threads = init.threads;
  params.n_threads_batch = init.threads;
  params.embeddings = true;
  params.pooling_type = -1; // LLAMA_POOLING_TYPE_UNSPECIFIED: the model's own (its GGUF's pooling_type)
  params.flash_attn_type = flashAttention ? -1 : 0; // LLAMA_FLASH_ATTN_TYPE_AUTO : _DISABLED
  params.no_perf = true;
  const handle = lib.llama_init_from_model(init.model as Handle, params);
  if (!handle) throw new Error("llama.cpp could not create an embedding context (out of memory?)");
  if (lib.llama_pooling_type(handle) <= 0) throw new Error("the model has no pooling type: it is not a sentence-embedding model");
  // One threadpool for both: this thread runs one decode at a time.
  if (pool) lib.llama_attach_threadpool(handle, pool, pool);
  return handle;
}

function embed(message: EmbedMessage): EmbedReply {
  let at = 0;
  message.lengths.forEach((length, sequence) => {
    for (let position = 0; position < length; position++, at++) {
      batch.token[at] = message.tokens[at]!;
      batch.pos[at] = position;
      batch.nSeq[at] = 1;
      batch.seq[at]![0] = sequence;
      batch.output[at] = 1;
    }
  });
  batchValue.n_tokens = at;
  const context = at < FLASH_ATTENTION_MIN_TOKENS ? small : large;
  const started = performance.now();
  const status = lib.llama_decode(context, batchValue);
  if (status !== 0) throw new Error(`llama_decode failed (${status}) on a batch of ${message.lengths.length} inputs, ${at} tokens`);
  const vectors = new Float32Array(message.lengths.length * dimensions);
  for (let sequence = 0; sequence < message.lengths.length; sequence++) {
    const pointer = lib.llama_get_embeddings_seq(context, sequence);
    if (!pointer) throw new Error(`llama.cpp pooled no embedding for sequence ${sequence}`);
    const vector = vectors.subarray(sequence * dimensions, (sequence + 1) * dimensions);
    vector.set(new Float32Array(koffi.view(pointer, dimensions * 4)));
    normalize(vector);
  }
  const decodeMs = performance.now() - started;
  return { type: "embedded", vectors, decodeMs, ...(message.json ? { json: vectorsJson(vectors, dimensions) } : {}) };
}

/**
 * Sentence-transformers models end in a Normalize module: unit length, so a dot product is the
 * cosine. Done here, in place, rather than on the event loop that serves every request.
 */
function normalize(vector: Float32Array): void {
  let sum = 0;
  for (let i = 0; i < vector.length; i++) sum += vector[i]! * vector[i]!;
  const norm = Math.sqrt(sum) || 1;
  for (let i = 0; i < vector.length; i++) vector[i] = vector[i]! / norm;
}

// A first batch on each context touches ggml's compute buffers and threadpool before any request waits on them.
warmUp(FLASH_ATTENTION_MIN_TOKENS - 1);
warmUp(init.batchTokens);

function warmUp(tokens: number): void {
  const longest = Math.min(tokens, lib.llama_model_n_ctx_train(init.model as Handle));
  const inputs = Math.min(init.batchSequences, Math.floor(tokens / longest));
  const token = Math.max(0, lib.llama_vocab_bos(lib.llama_model_get_vocab(init.model as Handle)));
  embed({ type: "embed", tokens: new Int32Array(inputs * longest).fill(token), lengths: Array<number>(inputs).fill(longest), json: false });
}
parentPort!.on("message", (message: EmbedMessage | { type: "close" }) => {
  if (message.type === "close") {
    lib.llama_free(small);
    lib.llama_free(large);
    parentPort!.postMessage({ type: "closed" });
    return;
  }
  try {
    const reply = embed(message);
    parentPort!.postMessage(reply, transferList(reply));
  } catch (error) {
    parentPort!.postMessage({ type: "failed", message: (error as Error).message } satisfies EmbedFailure);
  }
});
parentPort!.postMessage({ type: "ready", dimensions });
