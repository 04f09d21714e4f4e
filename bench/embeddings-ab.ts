/**
 * Two builds of Switchyard on embeddings, alternated request by request: both servers up at once,
 * each round one 256-input request (or 16 clients of 16 single inputs each, or 32 single inputs one
 * after another) to one build then the other, the order reversed every other round, and each
 * round's head ÷ base (for one input: the round's p50 latency, as base ÷ head, so above 1 is faster). bench:compare's
 * batch-256 scenario sends two requests a round, too few on a shared machine.
 *
 *   node --import tsx bench/embeddings-ab.ts --base /tmp/base-checkout [--head .] [--shape 256|c16|1] [--rounds 12]
 *
 * Each checkout must be built (`npm run build`). Prints the medians and the ratios' median and
 * range; writes bench/results/embeddings-ab-<time>.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { Command } from "commander";
import { Agent, request } from "undici";
import { EMBEDDING_MODEL } from "./embeddings.js";
import { cpuDescription, startSwitchyard, type RunningTarget } from "./peers/targets.js";

const opts = new Command()
  .requiredOption("--base <dir>", "the base checkout, built")
  .option("--head <dir>", "the head checkout, built", ".")
  .option(
    "--shape <shape>",
    "256 (one request of 256 inputs a round), c16 (16 clients, 16 single inputs each) or 1 (32 single inputs in turn)",
    "256",
  )
  .option("--rounds <n>", "rounds", "12")
  .option("--out <file>", "where the JSON goes", `bench/results/embeddings-ab-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
  .parse()
  .opts<{ base: string; head: string; shape: string; rounds: string; out: string }>();

const WORDS =
  "the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their".split(
    " ",
  );
/** bench/embeddings.ts's sentences: 8 to 16 words, fixed by the index. */
const sentence = (i: number) => `${Array.from({ length: 8 + (i % 9) }, (_, k) => WORDS[(i * 7 + k * 13) % WORDS.length]).join(" ")} ${i}.`;

const agent = new Agent({ connections: 32 });
const builds = ["base", "head"] as const;
const servers = new Map<string, RunningTarget>();

async function post(build: string, input: string | string[]): Promise<void> {
  const target = servers.get(build)!.target;
  const response = await request(`${target.baseURL}/embeddings`, {
    method: "POST",
    dispatcher: agent,
    headers: { "content-type": "application/json", authorization: `Bearer ${target.key}` },
    body: JSON.stringify({ model: target.model, input, encoding_format: "float" }),
  });
  const body = (await response.body.json()) as { data?: unknown[] };
  if (response.statusCode !== 200 || body.data?.length !== (Array.isArray(input) ? input.length : 1))
    throw new Error(`${build}: HTTP ${response.statusCode}`);
}

/** Single inputs one after another: the round's p50 latency, as requests a second (1000 ÷ p50 ms). */
async function singles(build: string, index: number): Promise<number> {
  const latencies: number[] = [];
  for (let k = 0; k < SINGLES; k++) {
    const started = performance.now();
    await post(build, sentence(index * SINGLES + k));
    latencies.push(performance.now() - started);
  }
  return 1000 / median(latencies);
}

const SINGLES = 32;

/** One round's inputs a second on one build (for one input: 1000 ÷ its p50 ms). */
async function round(build: string, index: number): Promise<number> {
  if (opts.shape === "1") return singles(build, index);
  const started = performance.now();
  if (opts.shape === "256")
    await post(
      build,
      Array.from({ length: 256 }, (_, k) => sentence(index * 256 + k)),
    );
  else
    await Promise.all(
      Array.from({ length: 16 }, async (_, client) => {
        for (let k = 0; k < 16; k++) await post(build, sentence(index * 256 + client * 16 + k));
      }),
    );
  return 256 / ((performance.now() - started) / 1000);
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return (sorted[(sorted.length - 1) >> 1]! + sorted[sorted.length >> 1]!) / 2;
};

try {
  for (const [i, build] of builds.entries()) {
    const root = resolve(build === "base" ? opts.base : opts.head);
    const port = 18930 + i;
    servers.set(
      build,
      await startSwitchyard(
        { modelId: EMBEDDING_MODEL, modelPath: "", threads: 2, parallel: 16, contextPerSequence: 512, port },
        build,
        {},
        root,
      ),
    );
    for (let k = 0; k < 3; k++) await round(build, -1 - k); // warm-up
  }
  const rates: Record<string, number[]> = { base: [], head: [] };
  for (let r = 0; r < Number(opts.rounds); r++)
    for (const build of r % 2 === 0 ? builds : [...builds].reverse()) rates[build]!.push(await round(build, r));
  const ratios = rates.head!.map((head, r) => head / rates.base![r]!);
  const result = {
    cpu: cpuDescription().model,
    shape: opts.shape,
    rounds: Number(opts.rounds),
    inputsPerS: { base: median(rates.base!), head: median(rates.head!) },
    headOverBase: { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) },
    rates,
  };
  const p50 = (rates: number[]) => (1000 / median(rates)).toFixed(2);
  if (opts.shape === "1") console.log(`one input, p50 ms (median of the rounds' p50s): base ${p50(rates.base!)}, head ${p50(rates.head!)}`);
  console.table([
    {
      shape: opts.shape,
      "base inputs/s": result.inputsPerS.base.toFixed(1),
      "head inputs/s": result.inputsPerS.head.toFixed(1),
      "head ÷ base (median of rounds)": result.headOverBase.median.toFixed(3),
      range: `${result.headOverBase.min.toFixed(2)}..${result.headOverBase.max.toFixed(2)}`,
    },
  ]);
  mkdirSync(dirname(opts.out), { recursive: true });
  writeFileSync(opts.out, JSON.stringify(result, null, 2));
} finally {
  await agent.close();
  for (const server of servers.values()) await server.stop();
}
