/**
 * Which shard arrangement suits this CPU: the engine's own binding and context settings (a KV stream
 * per sequence, the shards' threadpool), one decode step of every sequence, measured for one context
 * of all the sequences on every thread (`SWITCHYARD_SHARDS=1`) and for one shard's share on one
 * thread (the default: a shard per thread), each followed by sampling every sequence's token with
 * two chains: llama-server's spelled-out sampling (`top_k` 40, `top_p`, `min_p`, temperature 0.8) and
 * OpenAI's temperature-only draw over the whole vocabulary. The sampling is also run as llama.cpp's
 * experimental backend sampling (`llama_set_sampler`: the chain in the decode's graph, on the
 * threadpool) to show whether it takes the draw off the runner thread.
 *
 *   node --import tsx bench/step-arrangements.ts [--sequences 16] [--threads 2] [--prompt 112] [--steps 48]
 *
 * The one-thread share runs alone, with the other cores idle: an upper bound for shards that in
 * service run side by side. Prints a table (ms per step, tokens/s) and the predicted ratio of one
 * shard to a shard per thread; writes bench/results/step-arrangements-<time>.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Command } from "commander";
import koffi from "koffi";
import { openLlamaLibrary, prebuiltLibraryDir, PREBUILT_FILES, type Handle } from "../src/engine/native/llama-lib.js";
import { cpuDescription, listedModelPath } from "./peers/targets.js";

const opts = new Command()
  .option("--model <id>", "catalog id", "HuggingFaceTB/SmolLM2-135M-Instruct")
  .option("--sequences <n>", "sequences decoded together over all shards", "16")
  .option("--threads <n>", "threads (= shards by default)", "2")
  .option("--prompt <n>", "cells each sequence holds before the measured steps", "112")
  .option("--steps <n>", "measured decode steps per arrangement", "48")
  .option("--out <prefix>", "where results go", `bench/results/step-arrangements-${new Date().toISOString().replace(/[:.]/g, "-")}`)
  .parse()
  .opts<{ model: string; sequences: string; threads: string; prompt: string; steps: string; out: string }>();

const lib = openLlamaLibrary();
const llama = koffi.load(join(prebuiltLibraryDir(), PREBUILT_FILES.llama));
const setBackendSampler = llama.func("bool llama_set_sampler(uintptr_t ctx, int32_t seq, uintptr_t smpl)");
const backendToken = llama.func("int32_t llama_get_sampled_token_ith(uintptr_t ctx, int32_t i)");
const model = lib.llama_model_load_from_file(listedModelPath(opts.model), lib.llama_model_default_params());
const [SEQUENCES, THREADS, PROMPT, STEPS] = [opts.sequences, opts.threads, opts.prompt, opts.steps].map(Number) as [
  number,
  number,
  number,
  number,
];

type Sampling = "top-k 40" | "temperature only";
const CHAINS: Record<Sampling, () => Handle> = {
  "top-k 40": () =>
    chain([
      lib.llama_sampler_init_top_k(40),
      lib.llama_sampler_init_top_p(0.95, 1),
      lib.llama_sampler_init_min_p(0.05, 1),
      lib.llama_sampler_init_temp(0.8),
    ]),
  "temperature only": () => chain([lib.llama_sampler_init_temp(1)]),
};

function chain(stages: Handle[]): Handle {
  const handle = lib.llama_sampler_chain_init({ no_perf: true });
  for (const stage of [...stages, lib.llama_sampler_init_dist(42)]) lib.llama_sampler_chain_add(handle, stage);
  return handle;
}

/** One arrangement: `sequences` decoded together on `threads`; ms per decode and per sampling of every sequence (median step). */
function measure(sequences: number, threads: number, sampling: Sampling, backend: boolean): { decodeMs: number; sampleMs: number } {
  const params = lib.llama_context_default_params();
  Object.assign(params, { n_ctx: sequences * 2048, n_batch: 256, n_ubatch: 256, n_seq_max: sequences, n_outputs_max: sequences + 64 });
  Object.assign(params, { n_threads: threads, n_threads_batch: threads, kv_unified: false, no_perf: true });
  const context = lib.llama_init_from_model(model as Handle, params);
  const pool = lib.newThreadpool(threads);
  if (pool) lib.llama_attach_threadpool(context, pool, pool);
  const chains = Array.from({ length: sequences }, () => CHAINS[sampling]());
  if (backend) chains.forEach((c, seq) => setBackendSampler(context, seq, c));
  const batch = lib.llama_batch_init(256, 0, 1);
  const view = {
    token: new Int32Array(koffi.view(batch.token, 256 * 4)),
    pos: new Int32Array(koffi.view(batch.pos, 256 * 4)),
    nSeq: new Int32Array(koffi.view(batch.n_seq_id, 256 * 4)),
    logits: new Int8Array(koffi.view(batch.logits, 256)),
    seq: Array.from(new BigUint64Array(koffi.view(batch.seq_id, 256 * 8)), (p) => new Int32Array(koffi.view(p, 4))),
  };
  const put = (i: number, token: number, pos: number, seq: number, logits: boolean) => {
    [view.token[i], view.pos[i], view.nSeq[i], view.seq[i]![0], view.logits[i]] = [token, pos, 1, seq, logits ? 1 : 0];
  };
  for (let seq = 0; seq < sequences; seq++) {
    for (let i = 0; i < PROMPT; i++) put(i, 100 + ((i * 7919 + seq * 31) % 40000), i, seq, i === PROMPT - 1);
    batch.n_tokens = PROMPT;
    lib.llama_decode(context, batch);
  }
  const last = new Int32Array(sequences).fill(300);
  const decodes: number[] = [];
  const samples: number[] = [];
  for (let step = 0; step < STEPS + 4; step++) {
    for (let seq = 0; seq < sequences; seq++) put(seq, last[seq]!, PROMPT + step, seq, true);
    batch.n_tokens = sequences;
    const started = performance.now();
    lib.llama_decode(context, batch);
    // The decode is done when its outputs are read (backend sampling's tokens are among them).
    if (backend) backendToken(context, 0);
    else lib.llama_get_logits_ith(context, 0);
    const decoded = performance.now();
    for (let seq = 0; seq < sequences; seq++) {
      if (!backend) last[seq] = lib.llama_sampler_sample(chains[seq]!, context, seq);
      else lib.llama_sampler_accept(chains[seq]!, (last[seq] = backendToken(context, seq)));
    }
    // The first steps warm the graph and the threadpool.
    if (step >= 4) [decodes.push(decoded - started), samples.push(performance.now() - decoded)];
  }
  chains.forEach((c) => lib.llama_sampler_free(c));
  lib.llama_batch_free(batch);
  lib.llama_free(context);
  const median = (values: number[]) => values.sort((a, b) => a - b)[values.length >> 1]!;
  return { decodeMs: median(decodes), sampleMs: median(samples) };
}

const rows = [];
const share = Math.ceil(SEQUENCES / THREADS);
for (const sampling of Object.keys(CHAINS) as Sampling[]) {
  for (const backend of [false, true]) {
    const one = measure(SEQUENCES, THREADS, sampling, backend);
    const each = measure(share, 1, sampling, backend);
    const oneRate = (SEQUENCES * 1000) / (one.decodeMs + one.sampleMs);
    const perThreadRate = (THREADS * share * 1000) / (each.decodeMs + each.sampleMs);
    const where = backend ? "backend (in the graph)" : "runner thread";
    rows.push({
      sampling,
      "sampled on": where,
      arrangement: `1 shard: ${SEQUENCES} seq, ${THREADS} threads`,
      ...fixed(one),
      "tok/s": Math.round(oneRate),
    });
    rows.push({
      sampling,
      "sampled on": where,
      arrangement: `${THREADS} shards: ${share} seq, 1 thread each`,
      ...fixed(each),
      "tok/s": Math.round(perThreadRate),
    });
    rows.push({
      sampling,
      "sampled on": where,
      arrangement: "1 shard ÷ a shard per thread",
      "decode ms": "",
      "sample ms": "",
      "tok/s": Number((oneRate / perThreadRate).toFixed(3)),
    });
  }
}
console.table(rows);
const cpu = cpuDescription();
console.log(`CPU: ${cpu.model}; ${opts.model}; ${PROMPT} cells a sequence before the ${STEPS} measured steps`);
mkdirSync("bench/results", { recursive: true });
writeFileSync(`${opts.out}.json`, JSON.stringify({ at: new Date().toISOString(), cpu, options: opts, rows }, null, 2));
console.log(`wrote ${opts.out}.json`);

function fixed(m: { decodeMs: number; sampleMs: number }) {
  return { "decode ms": Number(m.decodeMs.toFixed(2)), "sample ms": Number(m.sampleMs.toFixed(2)) };
}
