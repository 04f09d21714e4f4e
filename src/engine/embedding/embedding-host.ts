import { Worker } from "node:worker_threads";
import { availableParallelism } from "node:os";
import { loadModel, type LoadedModel } from "../native/loaded-model.js";
import type { ServiceTier } from "../../protocol/tiers.js";
import type { Token } from "../types.js";
import type { EmbedFailure, EmbedMessage, EmbedReply, EmbeddingRunnerInit, OnnxRunnerInit } from "./embedding-protocol.js";
import type { EmbeddingStats } from "../../protocol/health-response.js";
import { EmbeddingQueue, type QueuedInput } from "./embedding-queue.js";
import type { Embedded } from "./embedded.js";

export type { EmbeddingStats, Embedded };

/**
 * A sentence-embedding model in the engine: its weights loaded once, tokenized on the main thread
 * (WordPiece is linear and fast), and run on one runner thread whose every llama_decode takes as many
 * queued inputs as fit (many requests' inputs together), in tier order.
 */
export interface EmbeddingHostOptions {
  modelPath: string;
  /** llama.cpp threads in all (default: one per core). */
  threads?: number;
  /** Runner threads, each with its own context and threads/shards llama.cpp threads (default: one, on every thread). */
  shards?: number;
  /** Tokens per llama_decode (default 512, at least the model's context): see README, "Embeddings". */
  batchTokens?: number;
  /** Inputs waiting at most; more is a busy error (default 65,536). */
  maxWaitingInputs?: number;
  /** Whether other work on these cores is priority work that lower tiers' batches give way to (see EmbeddingQueue). */
  giveWay?: () => boolean;
  /**
   * The model's ONNX graph (catalog/convert/bert-onnx.ts): given, the runners are ONNX Runtime's and
   * the GGUF only tokenizes; absent, llama.cpp runs the GGUF.
   */
  onnxPath?: string;
}

export interface EmbeddingHost {
  /** Native vector length. */
  readonly dimensions: number;
  /** Tokens one input may hold, CLS and SEP included (the model's trained context). */
  readonly maxInputTokens: number;
  readonly vocabularySize: number;
  /**
   * The text's token ids as the model sees them: CLS, WordPiece tokens, SEP (`addSpecial` false: the
   * WordPiece tokens alone). A long text is tokenized a slice at a time, the event loop free between slices.
   */
  tokenize(text: string, options?: { addSpecial?: boolean }): Promise<Int32Array>;
  /** Token ids back into text, CLS and SEP spelled out. */
  detokenize(ids: readonly number[]): string;
  /** One token as text. */
  tokenText(id: number): string;
  /** Token ids a client sent: wrapped in CLS/SEP where they are not already. */
  wrapTokens(ids: readonly number[]): Int32Array;
  /**
   * Each input's L2-normalised embedding, in order, and with `json` each one's JSON text too.
   * Rejects with QueueFullError when too many wait.
   */
  embed(inputs: readonly Int32Array[], tier: ServiceTier, signal?: AbortSignal, json?: boolean): Promise<Embedded>;
  stats(): EmbeddingStats;
  close(): Promise<void>;
}

const workerUrl = (name: string) => new URL(`./${name}${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);
const LLAMA_WORKER_URL = workerUrl("embedding-worker");
const ONNX_WORKER_URL = workerUrl("onnx-worker");
const MAX_SEQUENCES = 256; // llama.cpp's LLAMA_MAX_SEQ

export async function createEmbeddingHost(options: EmbeddingHostOptions): Promise<EmbeddingHost> {
  const model = loadModel(options.modelPath);
  const maxInputTokens = model.trainContextSize;
  // One context on every thread by default, unlike the chat engine's one-thread shards: an input is
  // one decode, so one context per thread left a single input on one core. Measured on a quiet
  // 2-core AMD EPYC (zen4 kernels), engine alone: one short input 8.96 → 4.69 ms, 256 inputs 343 →
  // 363 inputs/s. SWITCHYARD_SHARDS still splits it (the spin-wait trade-off on a busy machine).
  const threads = Math.max(1, options.threads ?? availableParallelism());
  const shards = Math.max(1, Math.min(options.shards ?? 1, threads));
  const init: EmbeddingRunnerInit = {
    libraryDir: model.libraryDir,
    model: model.handle,
    batchTokens: Math.max(options.batchTokens ?? 512, maxInputTokens),
    batchSequences: MAX_SEQUENCES,
    threads: Math.max(1, Math.floor(threads / shards)),
  };
  const onnx: OnnxRunnerInit | undefined = options.onnxPath
    ? { modelPath: options.onnxPath, threads: init.threads, warmUpToken: Math.max(0, model.bosToken ?? 0) }
    : undefined;
  const started = await Promise.all(
    Array.from({ length: shards }, () => (onnx ? startRunner(ONNX_WORKER_URL, onnx) : startRunner(LLAMA_WORKER_URL, init))),
  );
  const workers = started.map((s) => s.worker);
  const dimensions = started[0]!.dimensions;
  const queue = new EmbeddingQueue({
    batchTokens: init.batchTokens,
    batchSequences: MAX_SEQUENCES,
    maxWaiting: options.maxWaitingInputs ?? 65_536,
    dimensions,
    runners: workers.map(runOn),
    giveWay: options.giveWay,
  });
  return {
    dimensions,
    maxInputTokens,
    vocabularySize: model.vocabularySize,
    tokenize: (text, options) => tokenizeSliced(model, text, options),
    detokenize: (ids) => model.detokenize(ids as Token[]),
    tokenText: (id) => model.tokenText(id as Token),
    wrapTokens: (ids) => wrapTokens(model, ids),
    embed: (inputs, tier, signal, json) => queue.submit(inputs, tier, signal, json),
    stats: () => queue.stats(),
    async close() {
      await queue.close();
      await Promise.all(workers.map(closeRunner));
      model.free();
    },
  };
}

async function startRunner(url: URL, init: EmbeddingRunnerInit | OnnxRunnerInit): Promise<{ worker: Worker; dimensions: number }> {
  const worker = new Worker(url, { workerData: init, name: "switchyard-embeddings" });
  const dimensions = await new Promise<number>((resolve, reject) => {
    worker.once("message", (ready: { dimensions: number }) => resolve(ready.dimensions));
    worker.once("error", reject);
  });
  return { worker, dimensions };
}

async function closeRunner(worker: Worker): Promise<void> {
  const closed = new Promise<void>((resolve) => worker.once("message", () => resolve()));
  worker.postMessage({ type: "close" });
  await closed;
  await worker.terminate();
}

/** One batch on the runner thread at a time (the queue never sends a second before the first returns). */
function runOn(worker: Worker) {
  let failure: Error | undefined;
  worker.on("error", (error) => (failure ??= error));
  worker.on("exit", (code) => (failure ??= new Error(`the embedding runner thread exited (code ${code})`)));
  return (batch: QueuedInput[]): Promise<EmbedReply> => {
    if (failure) return Promise.reject(failure);
    const tokens = new Int32Array(batch.reduce((sum, input) => sum + input.tokens.length, 0));
    let at = 0;
    for (const input of batch) {
      tokens.set(input.tokens, at);
      at += input.tokens.length;
    }
    return new Promise((resolve, reject) => {
      const onExit = () => reject(failure);
      worker.once("exit", onExit);
      worker.once("message", (reply: EmbedReply | EmbedFailure) => {
        worker.off("exit", onExit);
        if (reply.type === "failed") reject(new Error(reply.message));
        else resolve(reply);
      });
      const message: EmbedMessage = {
        type: "embed",
        tokens,
        lengths: batch.map((input) => input.tokens.length),
        json: batch.some((input) => input.json),
      };
      worker.postMessage(message, [tokens.buffer]);
    });
  };
}

/** Characters of text tokenized between two turns of the event loop (about 1 ms of WordPiece). */
const SLICE_CHARS = 8 * 1024;

/**
 * WordPiece splits a text at whitespace before anything else, so slices cut at whitespace give
 * exactly the whole text's tokens; a 4 MB input took 0.45 s of the main thread in one call.
 */
async function tokenizeSliced(model: LoadedModel, text: string, { addSpecial = true }: { addSpecial?: boolean } = {}): Promise<Int32Array> {
  if (text.length <= SLICE_CHARS) return Int32Array.from(model.tokenize(text, { addSpecial }));
  const ids: number[] = [];
  for (let from = 0; from < text.length;) {
    const to = sliceEnd(text, from);
    for (const id of model.tokenize(text.slice(from, to), { addSpecial: false })) ids.push(id);
    from = to;
    if (from < text.length) await new Promise((resolve) => setImmediate(resolve));
  }
  return addSpecial ? wrapTokens(model, ids) : Int32Array.from(ids);
}

/** Where the slice from `from` ends: at whitespace at most SLICE_CHARS on (or the first after, for one long word). */
function sliceEnd(text: string, from: number): number {
  const limit = from + SLICE_CHARS;
  if (limit >= text.length) return text.length;
  for (let i = limit; i > from; i--) if (isSpace(text.charCodeAt(i))) return i;
  for (let i = limit; i < text.length; i++) if (isSpace(text.charCodeAt(i))) return i;
  return text.length;
}

const isSpace = (code: number) => code === 32 || (code >= 9 && code <= 13);

function wrapTokens(model: LoadedModel, ids: readonly number[]): Int32Array {
  const cls = model.bosToken;
  const sep = model.tokenize("", { addSpecial: true }).at(-1);
  const head = cls !== undefined && ids[0] !== cls ? [cls] : [];
  const tail = sep !== undefined && ids.at(-1) !== sep ? [sep] : [];
  return Int32Array.from([...head, ...ids, ...tail]);
}
