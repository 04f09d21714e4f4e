import { parentPort, workerData } from "node:worker_threads";
import koffi from "koffi";
import { openLlamaLibrary, type BatchValue, type Handle, type LlamaLibrary } from "../native/llama-lib.js";
import { createRequestSamplers } from "./request-samplers.js";
import type { DropAdapterMessage, MemoryOp, RunnerInit, SampledLogprob, StepMessage, StepReply } from "./step-protocol.js";

/**
 * A shard's runner: one llama.cpp context on this worker thread, so the main thread never waits on
 * a decode. Each step decodes the batch and samples every sequence that asked for a token, in one
 * message round trip. Sampler chains live here, one per request, for the request's whole life.
 */
const init = workerData as RunnerInit;
const lib = openLlamaLibrary(init.libraryDir, { quietLogs: false });
const vocab = lib.llama_model_get_vocab(init.model as Handle);
const vocabularySize = lib.llama_vocab_n_tokens(vocab);
const context = createContext(lib, init);
const memory = lib.llama_get_memory(context);
const batch = batchViews(lib.llama_batch_init(init.batchTokens, 0, 1), init.batchTokens);
const samplers = createRequestSamplers(lib, vocab, context, vocabularySize);
/** Preempted requests' cells, saved until they are readmitted. */
const saved = new Map<number, Buffer>();
let threads = init.threads;
/** The LoRA adapter set on the context (0n: none): llama.cpp applies it to every decode until changed. */
let adapter = 0n;
/** Tokens of the prompt chunk the warm-up runs (see warmUp). */
const WARM_UP_CHUNK = 32;
warmUp();

function createContext(lib: LlamaLibrary, options: RunnerInit): Handle {
  const params = lib.llama_context_default_params();
  params.n_ctx = options.sequences * options.cellsPerSequence;
  params.n_batch = options.batchTokens;
  params.n_ubatch = options.batchTokens;
  params.n_seq_max = options.sequences;
  // Logits are read for one token per sequence a step, plus the draft tokens verified; room for a
  // whole batch of them (n_vocab floats each) would cost 50 MB a context at 256 tokens for a 49k vocabulary.
  params.n_outputs_max = options.sequences + options.draftTokens;
  params.n_threads = options.threads;
  params.n_threads_batch = options.threads;
  // One KV stream per sequence: attention then reads only the sequence's own cells. A unified
  // buffer made every token attend over every sequence's cells: 167 against 276 tok/s measured at
  // 16 sequences of 256 tokens on one thread.
  params.kv_unified = false;
  params.no_perf = true;
  const handle = lib.llama_init_from_model(options.model as Handle, params);
  if (!handle) throw new Error("llama.cpp could not create a context (out of memory?)");
  const pool = lib.newThreadpool(options.threads);
  if (pool) lib.llama_attach_threadpool(handle, pool, pool);
  return handle;
}

/**
 * Runs the two shapes of step the shard will run before any request sees it: one decode over every
 * sequence (a token each), and a short prompt chunk on one sequence; then clears the cells.
 * The first burst after start was slow (8 parallel requests: 1.43 s, against 0.83 s warm): ggml's
 * compute buffers, graph and threadpool, and each sequence's first cells, are first touched here.
 * The chunk is short: llama.cpp reserves its compute buffers for the largest batch when the context
 * is made, and a full 256-token chunk cost every start a prefill (2.3 s a shard on a busy machine).
 */
function warmUp(): void {
  const token = Math.max(0, lib.llama_vocab_bos(vocab));
  // Logits for every entry of the decode (one per sequence, as sampling needs), only the last of the prompt.
  const decode = (entries: Array<[sequence: number, position: number]>, everyOutput: boolean) => {
    entries.forEach(([sequence, position], i) => {
      batch.token[i] = token;
      batch.pos[i] = position;
      batch.nSeq[i] = 1;
      batch.seq[i]![0] = sequence;
      batch.logits[i] = everyOutput || i === entries.length - 1 ? 1 : 0;
    });
    batch.value.n_tokens = entries.length;
    const status = lib.llama_decode(context, batch.value);
    // Only a warm-up: a refusal is worth a line in the log, not a failed start.
    if (status !== 0) console.error(`llama.cpp refused the warm-up decode of ${entries.length} tokens (status ${status})`);
    // Each shape starts from empty cells: a sequence's positions must follow on from its last one.
    lib.llama_memory_clear(memory, false);
  };
  const sequences = Math.min(init.sequences, init.batchTokens);
  decode(
    Array.from({ length: sequences }, (_, sequence) => [sequence, 0]),
    true,
  );
  decode(
    Array.from({ length: Math.min(WARM_UP_CHUNK, init.batchTokens, init.cellsPerSequence) }, (_, position) => [0, position]),
    false,
  );
}

function batchViews(value: BatchValue, size: number) {
  const seqPointers = new BigUint64Array(koffi.view(value.seq_id, size * 8));
  return {
    value,
    token: new Int32Array(koffi.view(value.token, size * 4)),
    pos: new Int32Array(koffi.view(value.pos, size * 4)),
    nSeq: new Int32Array(koffi.view(value.n_seq_id, size * 4)),
    seq: Array.from(seqPointers, (pointer) => new Int32Array(koffi.view(pointer, 4))),
    logits: new Int8Array(koffi.view(value.logits, size)),
  };
}

/** Applies the step's memory operations; returns the keys of the restores that failed. */
function applyOps(ops: readonly MemoryOp[]): number[] {
  const failedRestores: number[] = [];
  for (const op of ops) {
    if (op.op === "rm") lib.llama_memory_seq_rm(memory, op.seq, op.from, -1);
    else if (op.op === "cp") lib.llama_memory_seq_cp(memory, op.src, op.dst, -1, -1);
    else if (op.op === "save") save(op.seq, op.key);
    else if (op.op === "forget") saved.delete(op.key);
    else if (!restore(op.seq, op.key)) failedRestores.push(op.key);
  }
  return failedRestores;
}

function save(seq: number, key: number): void {
  const size = lib.llama_state_seq_get_size(context, seq);
  const data = Buffer.allocUnsafe(size);
  if (size > 0 && lib.llama_state_seq_get_data(context, data, size, seq) === size) saved.set(key, data);
}

function restore(seq: number, key: number): boolean {
  const data = saved.get(key);
  saved.delete(key);
  if (data && lib.llama_state_seq_set_data(context, data, data.length, seq) > 0) return true;
  lib.llama_memory_seq_rm(memory, seq, 0, -1);
  return false;
}

/** The most negative log probability reported (JSON cannot carry -Infinity). */
const MIN_LOGPROB = -9999;

/** The token's log probability under the model's distribution, and the `top` most likely tokens. */
function logprobOf(index: number, token: number, top: number): SampledLogprob {
  const logits = new Float32Array(koffi.view(lib.llama_get_logits_ith(context, index), vocabularySize * 4));
  let max = -Infinity;
  for (const logit of logits) if (logit > max) max = logit;
  let sum = 0;
  for (const logit of logits) sum += Math.exp(logit - max);
  const norm = max + Math.log(sum);
  // The `top` best, kept sorted: a short insertion list beats sorting the whole vocabulary.
  const best: Array<[number, number]> = [];
  for (let i = 0; top > 0 && i < logits.length; i++) {
    const value = logits[i]!;
    if (best.length === top && value <= best[top - 1]![1]) continue;
    let at = best.length;
    while (at > 0 && best[at - 1]![1] < value) at--;
    best.splice(at, 0, [i, value]);
    if (best.length > top) best.pop();
  }
  const clamp = (logit: number) => Math.max(MIN_LOGPROB, logit - norm);
  return { logprob: clamp(logits[token]!), top: best.map(([id, logit]) => [id, clamp(logit)]) };
}

/**
 * Samples every order, verifying its draft: each draft token stands while the token sampled at the
 * position before it equals it (exact under any sampler: every token of the output is sampled
 * from the model's distribution at its position, by the request's own chain, which sees only
 * tokens of the output). The cells of the draft tokens after the first mismatch are removed.
 */
function sampleAll(message: StepMessage): Pick<StepReply, "tokens" | "counts" | "logprobs"> {
  const tokens: number[] = [];
  const counts = new Uint8Array(message.samples.length);
  const logprobs: Array<SampledLogprob | null> = [];
  message.samples.forEach((order, i) => {
    const sampler = samplers.has(order.sampler) ? order.sampler : undefined;
    const draft = order.draft ?? [];
    let accepted = 0;
    for (;;) {
      // Logits are read where llama.cpp was given the token (bySequence).
      const index = slots[order.index + accepted]!;
      const token = sampler === undefined ? -1 : samplers.sample(sampler, index);
      tokens.push(token);
      logprobs.push(sampler !== undefined && order.top >= 0 ? logprobOf(index, token, order.top) : null);
      if (accepted >= draft.length || token !== draft[accepted]) break;
      accepted++;
    }
    counts[i] = accepted + 1;
    if (accepted < draft.length)
      lib.llama_memory_seq_rm(memory, message.sequences[order.index]!, message.positions[order.index]! + 1 + accepted, -1);
  });
  return { tokens: Int32Array.from(tokens), counts, logprobs };
}

/** Where each token of the step's message sits in the batch given to llama.cpp (see bySequence). */
let slots: Int32Array = new Int32Array(0);

/**
 * Each token's place in the batch when the tokens are ordered by sequence id (each sequence's own
 * tokens keep their order). With a KV stream per sequence, llama.cpp splits a batch into
 * micro-batches of sequences whose ids follow one another in batch order (split_equal), each a
 * pass over the weights: in scheduler order, six decodes on Qwen2.5-Coder-0.5B took 231 ms on 2
 * AVX2 cores where the same six by id took 155.
 */
function bySequence(sequences: Int32Array): Int32Array {
  const order = Array.from(sequences.keys()).sort((a, b) => sequences[a]! - sequences[b]! || a - b);
  const placed = new Int32Array(sequences.length);
  order.forEach((index, slot) => (placed[index] = slot));
  return placed;
}

/** Applies `next` to the context's decodes from now on (0n: the base model alone); false if llama.cpp refuses. */
function setAdapter(next: bigint): boolean {
  const status = next === 0n ? lib.llama_set_adapters_lora(context, null, 0, null) : lib.llama_set_adapters_lora(context, [next], 1, [1]);
  if (status === 0) adapter = next;
  return status === 0;
}

/** A step whose decode did not happen: nothing sampled, every scheduled request fails with `error`. */
function failedStep(failedSamplers: StepReply["failedSamplers"], failedRestores: number[], error: string): StepReply {
  const empty = { tokens: new Int32Array(0), counts: new Uint8Array(0), logprobs: [], setupMs: 0, decodeMs: 0, sampleMs: 0 };
  return { type: "step", ...empty, failedSamplers, failedRestores, error };
}

function step(message: StepMessage): StepReply {
  const received = performance.now();
  const failedRestores = applyOps(message.ops);
  const failedSamplers: StepReply["failedSamplers"] = [];
  for (const { id, spec, history } of message.newSamplers) {
    try {
      samplers.add(id, spec, history);
    } catch (error) {
      failedSamplers.push({ id, reason: (error as Error).message });
    }
  }
  if (message.threads !== threads) {
    threads = Math.max(1, Math.min(init.threads, message.threads));
    lib.llama_set_n_threads(context, threads, threads);
  }
  const n = message.tokens.length;
  if (n > 0 && message.adapter !== adapter && !setAdapter(message.adapter))
    return failedStep(failedSamplers, failedRestores, "llama.cpp refused to set the step's LoRA adapter");
  const started = performance.now();
  if (n > 0) {
    slots = bySequence(message.sequences);
    for (let i = 0; i < n; i++) {
      const slot = slots[i]!;
      batch.token[slot] = message.tokens[i]!;
      batch.pos[slot] = message.positions[i]!;
      batch.nSeq[slot] = 1;
      batch.seq[slot]![0] = message.sequences[i]!;
      batch.logits[slot] = message.outputs[i]!;
    }
    batch.value.n_tokens = n;
    const status = lib.llama_decode(context, batch.value);
    if (status !== 0) return failedStep(failedSamplers, failedRestores, `llama_decode returned ${status}`);
  }
  const decoded = performance.now();
  const { tokens, counts, logprobs } = sampleAll(message);
  for (const id of message.freeSamplers) samplers.free(id);
  return {
    type: "step",
    tokens,
    counts,
    logprobs,
    failedSamplers,
    failedRestores,
    setupMs: started - received,
    decodeMs: decoded - started,
    sampleMs: performance.now() - decoded,
  };
}

parentPort!.on("message", (message: StepMessage | DropAdapterMessage | { type: "close" }) => {
  if (message.type === "drop-adapter") {
    if (adapter === message.adapter) setAdapter(0n);
    parentPort!.postMessage({ type: "adapter-dropped" });
    return;
  }
  if (message.type === "close") {
    samplers.freeAll();
    lib.llama_free(context);
    parentPort!.postMessage({ type: "closed" });
    return;
  }
  parentPort!.postMessage(step(message));
});
parentPort!.postMessage({ type: "ready" });
