/**
 * What one sequence's verification step costs: one llama_decode of N tokens of one sequence, every
 * token with logits (as a draft run's are), at position P, on the engine's own binding and context
 * settings (a KV stream per sequence, n_batch = n_ubatch). The floor under Predicted Outputs and
 * speculative decoding: a draft of N−1 tokens accepted whole brings N tokens for this time.
 * llama-batched-bench cannot show it (its prompts start at position 0, and only the last token of a
 * prompt has logits).
 *
 *   node --import tsx bench/verify-cost.ts [--positions 500,1000,1500] [--tokens 1,8,32,63,64,128] [--flash-attn -1]
 *
 * Prints ms per step and per token for each (P, N), the median of 5; writes
 * bench/results/verify-cost-<time>.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Command } from "commander";
import koffi from "koffi";
import { openLlamaLibrary, type Handle } from "../src/engine/native/llama-lib.js";
import { cpuDescription, listedModelPath } from "./peers/targets.js";

const opts = new Command()
  .option("--model <id>", "catalog id", "HuggingFaceTB/SmolLM2-135M-Instruct")
  .option("--threads <n>", "llama.cpp threads", "2")
  .option("--positions <list>", "positions the run starts at", "500,1000,1500")
  .option("--tokens <list>", "tokens in the run", "1,2,4,8,16,32,48,63,64,65,96,128")
  .option("--flash-attn <n>", "llama.cpp flash_attn_type (-1 auto, 0 off, 1 on)", "-1")
  .option("--out <prefix>", "where results go", `bench/results/verify-cost-${new Date().toISOString().replace(/[:.]/g, "-")}`)
  .parse()
  .opts<{ model: string; threads: string; positions: string; tokens: string; flashAttn: string; out: string }>();

const BATCH = 512;
const lib = openLlamaLibrary();
const model = lib.llama_model_load_from_file(listedModelPath(opts.model), lib.llama_model_default_params());
const params = lib.llama_context_default_params();
Object.assign(params, {
  n_ctx: 16 * 2048,
  n_batch: BATCH,
  n_ubatch: BATCH,
  n_seq_max: 16,
  n_outputs_max: BATCH,
  n_threads: Number(opts.threads),
  n_threads_batch: Number(opts.threads),
  kv_unified: false,
  no_perf: true,
  flash_attn_type: Number(opts.flashAttn),
});
const context = lib.llama_init_from_model(model as Handle, params);
const memory = lib.llama_get_memory(context);
const batch = lib.llama_batch_init(BATCH, 0, 1);
const view = {
  token: new Int32Array(koffi.view(batch.token, BATCH * 4)),
  pos: new Int32Array(koffi.view(batch.pos, BATCH * 4)),
  nSeq: new Int32Array(koffi.view(batch.n_seq_id, BATCH * 4)),
  logits: new Int8Array(koffi.view(batch.logits, BATCH)),
  seq: Array.from(new BigUint64Array(koffi.view(batch.seq_id, BATCH * 8)), (p) => new Int32Array(koffi.view(p, 4))),
};

/** Decodes `count` tokens of sequence 0 from `from` on; returns ms. */
function decode(from: number, count: number, everyLogit: boolean): number {
  for (let i = 0; i < count; i++) {
    view.token[i] = 100 + (((from + i) * 7919) % 40000);
    view.pos[i] = from + i;
    view.nSeq[i] = 1;
    view.seq[i]![0] = 0;
    view.logits[i] = everyLogit || i === count - 1 ? 1 : 0;
  }
  batch.n_tokens = count;
  const started = performance.now();
  if (lib.llama_decode(context, batch) !== 0) throw new Error(`llama_decode refused ${count} tokens at ${from}`);
  return performance.now() - started;
}

/** The sequence's cells from `from` up to `to`, in prompt-sized chunks. */
function fill(from: number, to: number): void {
  for (let at = from; at < to; at += 256) decode(at, Math.min(256, to - at), false);
}

const positions = opts.positions.split(",").map(Number);
const counts = opts.tokens.split(",").map(Number);
const rows: Array<{ position: number; tokens: number; ms: number; msPerToken: number }> = [];
fill(0, Math.max(...positions));
for (const position of positions) {
  for (const tokens of counts) {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      lib.llama_memory_seq_rm(memory, 0, position, -1);
      times.push(decode(position, tokens, true));
    }
    const ms = times.sort((a, b) => a - b)[2]!;
    rows.push({ position, tokens, ms: Number(ms.toFixed(1)), msPerToken: Number((ms / tokens).toFixed(2)) });
  }
  // The next position's runs follow on from cells up to it.
  lib.llama_memory_seq_rm(memory, 0, position, -1);
  fill(position, Math.max(...positions));
}
console.table(rows);
const cpu = cpuDescription();
console.log(`CPU: ${cpu.model}; ${opts.threads} threads; flash_attn_type ${opts.flashAttn}; ${opts.model}`);
mkdirSync("bench/results", { recursive: true });
writeFileSync(`${opts.out}.json`, JSON.stringify({ at: new Date().toISOString(), cpu, options: opts, rows }, null, 2));
console.log(`wrote ${opts.out}.json`);
