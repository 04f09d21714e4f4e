/**
 * Does an embeddings burst break the chat tiers' pace? One server serves SmolLM2 (chat) and
 * all-MiniLM-L6-v2 (embeddings); their engines share the cores. Chat streams of the priority and
 * default tiers run alone, then again beside a burst of embedding requests, in one run; the ratios
 * (with the burst / alone) are what to read.
 *
 *   npm run bench:embeddings-burst [-- --quick]
 *
 * Prints a table; writes bench/results/embeddings-burst-<time>.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { Command } from "commander";
import { streamChat, type RequestResult, type Target } from "./load/client-stream.js";
import { randomPrompts } from "./load/datasets.js";
import { summarize } from "./load/stats.js";
import { cpuDescription, cpuVariant, startSwitchyard } from "./peers/targets.js";

const CHAT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct";
const EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2";
const opts = new Command()
  .option("--threads <n>", "threads", "2")
  .option("--quick", "a quarter of the requests")
  .option("--out <file>", "where the JSON goes", `bench/results/embeddings-burst-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
  .parse()
  .opts<{ threads: string; quick?: boolean; out: string }>();
const STREAMS_PER_TIER = opts.quick ? 4 : 12;
const EMBEDDING_CLIENTS = 4;
const INPUTS_PER_REQUEST = 64;

/** Each tier's client sends its streams one after another (128 tokens in, 64 out). */
async function chatTiers(target: Target): Promise<Record<string, RequestResult[]>> {
  const run = async (tier: string, seed: number) => {
    const results: RequestResult[] = [];
    for (const messages of randomPrompts(STREAMS_PER_TIER, 128, seed)) results.push(await streamChat(target, messages, 64, tier));
    return results;
  };
  const [priority, standard] = await Promise.all([run("priority", 1), run("default", 2)]);
  return { priority: priority!, default: standard! };
}

/** Embedding clients loop until `done` resolves; returns the inputs embedded per second. */
async function burst(target: Target, done: Promise<unknown>): Promise<{ inputsPerS: number; failed: number }> {
  let stop = false;
  void done.then(() => (stop = true));
  const started = performance.now();
  let inputs = 0;
  let failed = 0;
  const input = Array.from(
    { length: INPUTS_PER_REQUEST },
    (_, i) => `Sentence ${i} of a burst of embedding requests about rivers and boats.`,
  );
  await Promise.all(
    Array.from({ length: EMBEDDING_CLIENTS }, async () => {
      while (!stop) {
        const response = await fetch(`${target.baseURL}/embeddings`, {
          method: "POST",
          headers: { authorization: `Bearer ${target.key}`, "content-type": "application/json" },
          body: JSON.stringify({ model: EMBEDDING_MODEL, input }),
        });
        await response.arrayBuffer();
        if (response.ok) inputs += INPUTS_PER_REQUEST;
        else failed++;
      }
    }),
  );
  return { inputsPerS: inputs / ((performance.now() - started) / 1000), failed };
}

const describe = (results: RequestResult[]) => ({
  ok: results.filter((r) => r.ok).length,
  ttftMs: summarize(results.flatMap((r) => (r.ttftMs === undefined ? [] : [r.ttftMs]))),
  itlMs: summarize(results.flatMap((r) => r.itlMs)),
});

const server = await startSwitchyard({
  modelId: `${CHAT_MODEL},${EMBEDDING_MODEL}`,
  modelPath: "",
  threads: Number(opts.threads),
  parallel: 16,
  contextPerSequence: 2048,
  port: 18600,
});
try {
  const chat: Target = { ...server.target, model: CHAT_MODEL };
  await chatTiers({ ...chat }); // warm: the first streams after a start are not what is measured
  const alone = await chatTiers(chat);
  const during = chatTiers(chat);
  const embeddings = await burst(chat, during);
  const beside = await during;
  const rows = ["priority", "default"].flatMap((tier) => [
    { tier, phase: "alone", ...describe(alone[tier]!) },
    { tier, phase: "beside the burst", ...describe(beside[tier]!) },
  ]);
  console.table(
    rows.map((r) => ({
      tier: r.tier,
      phase: r.phase,
      ok: r.ok,
      "ttft p50": r.ttftMs.p50.toFixed(0),
      "ttft p99": r.ttftMs.p99.toFixed(0),
      "itl p50": r.itlMs.p50.toFixed(1),
      "itl p99": r.itlMs.p99.toFixed(1),
    })),
  );
  const ratios = Object.fromEntries(
    ["priority", "default"].flatMap((tier) => {
      const [a, b] = [describe(alone[tier]!), describe(beside[tier]!)];
      return [
        [`${tier} TTFT p99, burst / alone`, +(b.ttftMs.p99 / a.ttftMs.p99).toFixed(2)],
        [`${tier} ITL p99, burst / alone`, +(b.itlMs.p99 / a.itlMs.p99).toFixed(2)],
      ];
    }),
  );
  console.table(ratios);
  console.log(`embeddings beside the chat: ${embeddings.inputsPerS.toFixed(1)} inputs/s, ${embeddings.failed} failed requests`);
  const cpu = cpuDescription();
  console.log(`CPU: ${cpu.model}; ggml variant: ${cpuVariant(server.target.pid)}`);
  mkdirSync(dirname(opts.out), { recursive: true });
  writeFileSync(
    opts.out,
    JSON.stringify(
      {
        at: new Date().toISOString(),
        cpu,
        variant: cpuVariant(server.target.pid),
        threads: Number(opts.threads),
        rows,
        ratios,
        embeddings,
      },
      null,
      2,
    ),
  );
  console.log(`wrote ${opts.out}`);
} finally {
  await server.stop();
}
