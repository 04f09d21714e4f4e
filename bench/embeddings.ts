/**
 * bench:compare's embeddings scenarios: our `/v1/embeddings` on all-MiniLM-L6-v2 against llama-server
 * `--embeddings --pooling mean` on the same converted GGUF and thread count, every server started at
 * once and the scenarios run round by round, each target in turn (see `interleaved`).
 *  - `batch-256`: one request with 256 short inputs, several times over (inputs/s);
 *  - `c16-single`: 16 clients, each sending single-input requests back to back (inputs/s);
 *  - `single`: one client, one short input a request (mean and p50 latency).
 * llama-server runs on the file we serve (the Q8_0 mix, README "Embeddings"), on the exact F32
 * conversion and on BF16, as built here, and on node-llama-cpp's prebuilt libraries (the files our engine loads),
 * which leaves the compilers out of the comparison. Each ratio takes the peer's best format (all
 * three hold the fidelity floor).
 */
import { execFileSync } from "node:child_process";
import { loadCatalog } from "../src/catalog/load.js";
import { pullModel } from "../src/catalog/pull.js";
import { resolveModelsDir } from "../src/config/paths.js";
import { cpuVariant, startLlamaServer, startSwitchyard, type PeerOptions, type RunningTarget } from "./peers/targets.js";

export const EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2";

export interface EmbeddingScenarioResult {
  target: string;
  scenario: string;
  inputs: number;
  seconds: number;
  inputsPerS: number;
  latencyMs: { mean: number; p50: number; p99: number };
  failed: number;
}

const WORDS =
  "the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their".split(
    " ",
  );

/** A short sentence of 8 to 16 words, fixed by its index: the same inputs for every target. */
function sentence(i: number): string {
  const length = 8 + (i % 9);
  return `${Array.from({ length }, (_, k) => WORDS[(i * 7 + k * 13) % WORDS.length]).join(" ")} ${i}.`;
}

async function embedOnce(target: RunningTarget["target"], input: string | string[]): Promise<{ ms: number; ok: boolean }> {
  const started = performance.now();
  const response = await fetch(`${target.baseURL}/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${target.key}` },
    body: JSON.stringify({ model: target.model, input, encoding_format: "float" }),
  }).catch(() => null);
  const ok =
    response?.status === 200 && ((await response.json()) as { data: unknown[] }).data.length === (Array.isArray(input) ? input.length : 1);
  return { ms: performance.now() - started, ok };
}

/** One target's share of a scenario: `requests` requests from `clients` clients, inputs from index `first` on. */
interface Slice {
  latencies: number[];
  failed: number;
  seconds: number;
  inputs: number;
}

async function runSlice(
  target: RunningTarget["target"],
  clients: number,
  requests: number,
  inputsPer: number,
  first: number,
): Promise<Slice> {
  const latencies: number[] = [];
  let failed = 0;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let r = next++; r < requests; r = next++) {
        const at = first + r;
        const input = inputsPer === 1 ? sentence(at) : Array.from({ length: inputsPer }, (_, k) => sentence(at * inputsPer + k));
        const result = await embedOnce(target, input);
        latencies.push(result.ms);
        if (!result.ok) failed++;
      }
    }),
  );
  return { latencies, failed, seconds: (performance.now() - started) / 1000, inputs: (requests - failed) * inputsPer };
}

/**
 * A target's slices of one scenario as one result: latencies pooled, inputs/s the median of its
 * slices' (this machine's neighbours come in bursts: a burst that lands in one slice moves a total
 * far more than a median; seen here, one slice of 128 single inputs at 36 inputs/s between three
 * at 119-167).
 */
function merged(target: string, scenario: string, slices: Slice[]): EmbeddingScenarioResult {
  const latencies = slices.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  const rates = slices.map((s) => s.inputs / s.seconds).sort((a, b) => a - b);
  const middle = rates.length >> 1;
  return {
    target,
    scenario,
    inputs: slices.reduce((sum, s) => sum + s.inputs, 0),
    seconds: slices.reduce((sum, s) => sum + s.seconds, 0),
    inputsPerS: rates.length % 2 === 1 ? rates[middle]! : (rates[middle - 1]! + rates[middle]!) / 2,
    latencyMs: { mean: latencies.reduce((a, b) => a + b, 0) / latencies.length, p50: at(0.5), p99: at(0.99) },
    failed: slices.reduce((sum, s) => sum + s.failed, 0),
  };
}

/**
 * Each scenario in rounds, every target taking its slice of a round in turn (the order reversed
 * every other round), all of them started beforehand: a machine that grows busier or quieter
 * during the run weighs on every target alike, where one target after another put the drift in
 * the ratios. The idle targets wait meanwhile (no work, threads asleep).
 */
async function interleaved(running: RunningTarget[], scale: (n: number) => number, rounds: number): Promise<EmbeddingScenarioResult[]> {
  const results: EmbeddingScenarioResult[] = [];
  for (const [scenario, clients, requests, inputsPer] of [
    ["batch-256", 1, scale(8), 256],
    ["c16-single", 16, scale(512), 1],
    ["single", 1, scale(256), 1],
  ] as const) {
    process.stderr.write(`embeddings ${scenario}: ${running.map((r) => r.target.name).join(", ")}, ${rounds} rounds...\n`);
    const perRound = Math.max(1, Math.ceil(requests / rounds));
    const slices = new Map<string, Slice[]>(running.map((r) => [r.target.name, []]));
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? running : [...running].reverse();
      for (const { target } of order) slices.get(target.name)!.push(await runSlice(target, clients, perRound, inputsPer, round * perRound));
    }
    for (const [name, taken] of slices) results.push(merged(name, scenario, taken));
  }
  return results;
}

/**
 * Another conversion of the same published zip: the catalog entry pulled again in `precision` (written
 * once beside the served file): the exact F32, and BF16 (llama.cpp's fastest format where the CPU has
 * AVX-512 BF16: on Zen 4 1.29x its Q8_0 on 256 inputs, docs/benchmarks/2026-12-06-embeddings-layer-norm.md).
 */
async function conversion(precision: "f32" | "bf16"): Promise<string> {
  const entry = (await loadCatalog()).find((e) => e.id === EMBEDDING_MODEL)!;
  return (await pullModel({ ...entry, precision }, { modelsDir: resolveModelsDir() })).path;
}

/** Runs the three scenarios on the targets that `targets` names, interleaved (see `interleaved`); a peer that is not built is skipped. */
export async function compareEmbeddings(options: {
  threads: number;
  port: number;
  quick: boolean;
  targets: string[];
  baseline?: string;
}): Promise<{
  results: EmbeddingScenarioResult[];
  variants: Record<string, string | null>;
  skipped: string[];
  ratios: Record<string, number | null>;
  modelPath: string;
}> {
  execFileSync(process.execPath, ["bin/switchyard.js", "models", "pull", EMBEDDING_MODEL], { stdio: ["ignore", "ignore", "inherit"] });
  const listed = (
    JSON.parse(execFileSync(process.execPath, ["bin/switchyard.js", "models", "list", "--json"], { encoding: "utf8" })) as Array<{
      id: string;
      path: string;
    }>
  ).find((m) => m.id === EMBEDDING_MODEL)!;
  const peer: PeerOptions = {
    modelId: EMBEDDING_MODEL,
    modelPath: listed.path,
    threads: options.threads,
    parallel: 16,
    contextPerSequence: 512,
    port: options.port,
  };
  const f32 = await conversion("f32");
  const bf16 = await conversion("bf16");
  const scale = (n: number) => (options.quick ? Math.max(2, Math.ceil(n / 4)) : n);
  // All of them run at once (see `interleaved`), each on a port of its own.
  const on = (index: number) => ({ ...peer, port: peer.port + index });
  const embeddings = ["--embeddings", "--pooling", "mean"];
  const starters: Array<[string, (index: number) => Promise<RunningTarget | null>]> = [
    ["switchyard", (i) => startSwitchyard(on(i), "switchyard")],
    ["switchyard-baseline", async (i) => (options.baseline ? startSwitchyard(on(i), "switchyard-baseline", {}, options.baseline) : null)],
    ["llama-server", (i) => startLlamaServer(on(i), "llama-server", embeddings)],
    ["llama-server-f32", (i) => startLlamaServer({ ...on(i), modelPath: f32 }, "llama-server-f32", embeddings)],
    ["llama-server-bf16", (i) => startLlamaServer({ ...on(i), modelPath: bf16 }, "llama-server-bf16", embeddings)],
    ["llama-server-our-binaries", (i) => startLlamaServer(on(i), "llama-server-our-binaries", embeddings, { ourBinaries: true })],
    [
      "llama-server-our-binaries-f32",
      (i) => startLlamaServer({ ...on(i), modelPath: f32 }, "llama-server-our-binaries-f32", embeddings, { ourBinaries: true }),
    ],
  ];
  const variants: Record<string, string | null> = {};
  const skipped: string[] = [];
  const running: RunningTarget[] = [];
  let results: EmbeddingScenarioResult[];
  try {
    for (const [index, [name, start]] of starters
      .filter(([name]) => options.targets.includes(name.replace(/-(f32|bf16)$/, "")))
      .entries()) {
      const started = await start(index);
      if (!started) {
        skipped.push(`${name} (embeddings): not built (see bench/peers/)`);
        continue;
      }
      running.push(started);
      await runSlice(started.target, 4, 8, 8, 0); // warm-up
      variants[name] = cpuVariant(started.target.pid);
    }
    results = await interleaved(running, scale, options.quick ? 2 : 4);
  } finally {
    await Promise.all(running.map((r) => r.stop()));
  }
  // A peer's figure is the best of its formats: the most inputs/s, the least latency.
  const of = (target: string, s: string) => {
    const rows = results.filter((r) => [target, `${target}-f32`, `${target}-bf16`].includes(r.target) && r.scenario === s);
    return s === "single"
      ? rows.sort((a, b) => a.latencyMs.mean - b.latencyMs.mean)[0]
      : rows.sort((a, b) => b.inputsPerS - a.inputsPerS)[0];
  };
  const ratio = (a?: number, b?: number) => (a !== undefined && b !== undefined && b > 0 ? Number((a / b).toFixed(2)) : null);
  /** Ours against another target on each shape: inputs/s (256 inputs, 16 clients) and one input's p50. */
  const against = (other: string, label: string) => ({
    [`embeddings, ${label}: 256 inputs`]: ratio(of("switchyard", "batch-256")?.inputsPerS, of(other, "batch-256")?.inputsPerS),
    [`embeddings, ${label}: 16 concurrent single inputs`]: ratio(
      of("switchyard", "c16-single")?.inputsPerS,
      of(other, "c16-single")?.inputsPerS,
    ),
    [`embeddings, ${label}: one short input, p50 latency`]: ratio(
      of("switchyard", "single")?.latencyMs.p50,
      of(other, "single")?.latencyMs.p50,
    ),
  });
  const ratios = {
    "embeddings, one request of 256 inputs: inputs/s vs llama-server (target >= 1.5, issue 53)": ratio(
      of("switchyard", "batch-256")?.inputsPerS,
      of("llama-server", "batch-256")?.inputsPerS,
    ),
    "embeddings, 16 concurrent single-input requests: inputs/s vs llama-server (target >= 1.2)": ratio(
      of("switchyard", "c16-single")?.inputsPerS,
      of("llama-server", "c16-single")?.inputsPerS,
    ),
    "embeddings, one short input: p50 latency vs llama-server (target <= 1)": ratio(
      of("switchyard", "single")?.latencyMs.p50,
      of("llama-server", "single")?.latencyMs.p50,
    ),
    ...against("switchyard-baseline", "this checkout vs --baseline"),
    "embeddings, one short input: mean latency vs llama-server": ratio(
      of("switchyard", "single")?.latencyMs.mean,
      of("llama-server", "single")?.latencyMs.mean,
    ),
    ...against("llama-server-our-binaries", "same binaries (llama-server on node-llama-cpp's libraries)"),
  };
  return { results, variants, skipped, ratios, modelPath: listed.path };
}
