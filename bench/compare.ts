/**
 * Our service side by side with llama.cpp's llama-server and llama-cpp-python's server, in one run,
 * on the same GGUF file and thread count. The `-f16` targets serve the F16 re-encoding of the same
 * file (SWITCHYARD_SERVE_FORMAT=f16, made at pull time), the format llama.cpp's CPU kernels run
 * fastest. Each target is started alone (they would fight over the cores), the scenarios run
 * against it, it is stopped, and the next one starts.
 *
 *   npm run bench:compare -- [--scenarios random-c16,random-c1,multiturn,mixed,priority-beside,edit] [--targets ...] [--quick]
 *
 * `edit` (bench/edit.ts): Predicted Outputs and speculative decoding, ours with SWITCHYARD_SPECULATION
 * off and auto, with and without `prediction`, against llama-server with each --spec-type.
 *
 * `adapter-mix` (bench/adapter-mix.ts): ours only, SmolLM2 only: a LoRA adapter (the French one,
 * built by its recipe if not cached) beside its base at c16, against the base alone.
 *
 * Prints a table and the ratios, writes bench/results/compare-<time>.json and .png.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { Command } from "commander";
import { barChartPng } from "./load/chart.js";
import { runScenario, type ScenarioReport } from "./load/scenario.js";
import { priorityBesideRatios } from "./priority-beside.js";
import { adapterMixRatios, FRENCH_ADAPTER, FRENCH_BASE, prepareFrenchAdapter } from "./adapter-mix.js";
import { scenarioSet, WARM_UP } from "./load/scenarios.js";
import { ceilingsFor, ceilingRows } from "./load/ceilings.js";
import { compareEmbeddings } from "./embeddings.js";
import { EditBench, type EditVariant } from "./edit.js";
import {
  cpuDescription,
  cpuVariant,
  startLlamaCppPython,
  startLlamaServer,
  startSwitchyard,
  type PeerOptions,
  type RunningTarget,
} from "./peers/targets.js";

const TARGETS =
  "switchyard-spec-off,switchyard,switchyard-priority-itl-100,switchyard-1ctx,switchyard-f16,switchyard-no-prefix-cache,llama-server,llama-server-ngram-simple,llama-server-ngram-mod,llama-server-our-binaries,llama-server-f16,llama-cpp-python";
const program = new Command()
  .option("--model <id>", "catalog id of the model", "HuggingFaceTB/SmolLM2-135M-Instruct")
  .option("--threads <n>", "llama.cpp threads, for every target", "2")
  .option("--parallel <n>", "our sequences = llama-server's slots", "16")
  .option(
    "--scenarios <list>",
    "which scenarios (embeddings: see bench/embeddings.ts)",
    "random-c16,random-c1,openai-c16,openai-c1,cached-c16,cached-c1,disturbed-c16,multiturn,mixed,mixed-batch,priority-beside,embeddings,edit",
  )
  .option("--targets <list>", "which targets, in order", TARGETS)
  .option(
    "--baseline <dir>",
    "another checkout, built (npm ci && npm run build): target switchyard-baseline runs it, beside this one's switchyard",
  )
  .option("--quick", "a quarter of the requests, 8 of the 24 edit documents (a smoke run)")
  .option("--edit-docs <n>", "edit scenario: how many of its 24 documents (default 24, --quick 8), taken in turn from each kind")
  .option("--out <prefix>", "where results go", `bench/results/compare-${new Date().toISOString().replace(/[:.]/g, "-")}`)
  .parse();
const opts = program.opts<{
  model: string;
  threads: string;
  parallel: string;
  scenarios: string;
  targets: string;
  baseline?: string;
  quick?: boolean;
  editDocs?: string;
  out: string;
}>();
const SCENARIOS = scenarioSet(opts.quick === true);
/** Scenarios any OpenAI-compatible server runs: no tiers, no adapters. */
const PLAIN = [...["random", "openai", "cached"].flatMap((kind) => [16, 8, 1].map((c) => `${kind}-c${c}`)), "disturbed-c16", "multiturn"];
/** Our server's scenarios, on this checkout and on a `--baseline` one (which has no `edit`: its prediction support may differ). */
const OURS = [...PLAIN, "mixed", "mixed-batch", "priority-beside"];
/** Which scenarios mean something for which target: tiers exist only on ours; multiturn needs a prefix cache. */
const APPLIES: Record<string, string[]> = {
  switchyard: [...OURS, "edit", "adapter-mix"],
  "switchyard-baseline": OURS,
  // Speculative decoding off (SWITCHYARD_SPECULATION=off; "switchyard" runs the default, auto).
  "switchyard-spec-off": ["random-c16", "random-c1", "cached-c16", "cached-c1", "priority-beside", "edit"],
  // Priority's inter-token target at 100 ms, where 8 lower-tier decodes fit beside it: the tier mix without lower tiers giving way.
  "switchyard-priority-itl-100": ["mixed"],
  "switchyard-1ctx": ["random-c16", "random-c1", "openai-c16", "cached-c16", "disturbed-c16"],
  "switchyard-f16": ["random-c16", "random-c1"],
  "switchyard-no-prefix-cache": ["multiturn"],
  // Its default --spec-type is none.
  "llama-server": [...PLAIN, "edit"],
  "llama-server-ngram-simple": ["edit"],
  "llama-server-ngram-mod": ["edit"],
  "llama-server-f16": ["random-c16", "random-c1"],
  "llama-server-our-binaries": ["random-c16", "random-c1", "openai-c16", "multiturn"],
  "llama-cpp-python": ["random-c16", "random-c1"],
};

// Makes the F16 re-encoding if it is not there yet and an -f16 target wants it, then reads both paths
// (without the re-encoding, the F16 path is the published file's).
const F16 = { ...process.env, SWITCHYARD_SERVE_FORMAT: "f16" };
const needF16 = opts.targets.split(",").some((t) => t.endsWith("-f16"));
execFileSync(process.execPath, ["bin/switchyard.js", "models", "pull", opts.model], {
  env: needF16 ? F16 : process.env,
  stdio: ["ignore", "ignore", "inherit"],
});
const listed = (
  JSON.parse(execFileSync(process.execPath, ["bin/switchyard.js", "models", "list", "--json"], { encoding: "utf8", env: F16 })) as Array<{
    id: string;
    path: string | null;
    published_path: string | null;
  }>
).find((m) => m.id === opts.model);
if (!listed?.path || !listed.published_path) throw new Error(`${opts.model} is not pulled: run 'npx switchyard models pull'`);
const { path: f16Path, published_path: modelPath } = listed;
const peer: PeerOptions = {
  modelId: opts.model,
  modelPath,
  threads: Number(opts.threads),
  parallel: Number(opts.parallel),
  contextPerSequence: 2048,
  port: 18400,
};

// adapter-mix: the French adapter served beside its base, by the switchyard target (its other scenarios run as ever).
const wanted = opts.scenarios.split(",");
const adapterCatalog =
  wanted.includes("adapter-mix") && opts.targets.split(",").includes("switchyard")
    ? opts.model === FRENCH_BASE
      ? prepareFrenchAdapter()
      : (() => {
          throw new Error(`adapter-mix: the French adapter is trained on ${FRENCH_BASE}, not on ${opts.model}`);
        })()
    : undefined;
const starters: Record<string, () => Promise<RunningTarget | null>> = {
  switchyard: () =>
    adapterCatalog
      ? startSwitchyard({ ...peer, alsoServe: [FRENCH_ADAPTER] }, "switchyard", { SWITCHYARD_CATALOG: adapterCatalog })
      : startSwitchyard(peer),
  "switchyard-baseline": async () => (opts.baseline ? startSwitchyard(peer, "switchyard-baseline", {}, opts.baseline) : null),
  "switchyard-spec-off": () => startSwitchyard(peer, "switchyard-spec-off", { SWITCHYARD_SPECULATION: "off" }),
  "switchyard-priority-itl-100": () => startSwitchyard(peer, "switchyard-priority-itl-100", { SWITCHYARD_PRIORITY_ITL_MS: "100" }),
  // One context with every thread, instead of a one-thread shard per core.
  "switchyard-1ctx": () => startSwitchyard(peer, "switchyard-1ctx", { SWITCHYARD_SHARDS: "1" }),
  "switchyard-f16": () => startSwitchyard(peer, "switchyard-f16", { SWITCHYARD_SERVE_FORMAT: "f16" }),
  "switchyard-no-prefix-cache": () => startSwitchyard(peer, "switchyard-no-prefix-cache", { SWITCHYARD_PREFIX_CACHE: "0" }),
  "llama-server": () => startLlamaServer(peer),
  // Prompt-lookup speculation, each mode with its own defaults (draft lengths included), as its users run it.
  "llama-server-ngram-simple": () => startLlamaServer(peer, "llama-server-ngram-simple", ["--spec-type", "ngram-simple"]),
  "llama-server-ngram-mod": () => startLlamaServer(peer, "llama-server-ngram-mod", ["--spec-type", "ngram-mod"]),
  "llama-server-f16": () => startLlamaServer({ ...peer, modelPath: f16Path }, "llama-server-f16"),
  "llama-server-our-binaries": () => startLlamaServer(peer, "llama-server-our-binaries", [], { ourBinaries: true }),
  "llama-cpp-python": () => startLlamaCppPython({ ...peer, parallel: 1 }),
};

// The ceilings first, alone on the machine: llama.cpp prefilling and decoding each scenario's batch
// shape with no server around it (llama-batched-bench), once per shape.
const ceilings = ceilingsFor(
  peer,
  wanted.flatMap((s) => SCENARIOS[s] ?? []),
);
const batched = ceilings.get("random 128/128 c16") ?? null;
const reports: ScenarioReport[] = [];
const skipped: string[] = [];
/** Which ggml CPU variant each target's process loaded: the same one on both sides is a fair run. */
const variants: Record<string, string | null> = {};
/** The edit scenario's passes per target: ours without and with `prediction`; llama-server gets it and ignores it. */
const EDIT_VARIANTS: Record<string, EditVariant[]> = {
  switchyard: [{ prediction: false }, { prediction: true }],
  "switchyard-spec-off": [{ prediction: false }],
  "llama-server": [{ prediction: true }],
  "llama-server-ngram-simple": [{ prediction: true }],
  "llama-server-ngram-mod": [{ prediction: true }],
};
const edit = wanted.includes("edit") ? new EditBench(opts.editDocs ? Number(opts.editDocs) : opts.quick ? 8 : undefined) : null;
for (const name of opts.targets.split(",")) {
  const scenarios = (APPLIES[name] ?? []).filter((s) => wanted.includes(s)).flatMap((s) => SCENARIOS[s] ?? []);
  const editVariants = edit && APPLIES[name]?.includes("edit") ? EDIT_VARIANTS[name] : undefined;
  if (scenarios.length === 0 && !editVariants) continue;
  const running = await starters[name]!();
  if (!running) {
    skipped.push(`${name}: not built (see bench/peers/)`);
    continue;
  }
  try {
    await runScenario(running.target, WARM_UP);
    if (scenarios.some((s) => s.name.startsWith("adapter-mix"))) await runScenario({ ...running.target, model: FRENCH_ADAPTER }, WARM_UP);
    variants[name] = cpuVariant(running.target.pid);
    for (const scenario of scenarios) {
      process.stderr.write(`${name}: ${scenario.name}...\n`);
      reports.push(await runScenario(running.target, scenario));
    }
    if (editVariants) await edit!.runTarget(running.target, editVariants, (line) => process.stderr.write(`${line}\n`));
  } finally {
    await running.stop();
  }
}

// Embeddings last, on their own model: ours against llama-server --embeddings on the same GGUF.
const embeddings = wanted.includes("embeddings")
  ? await compareEmbeddings({
      threads: peer.threads,
      port: peer.port + 50,
      quick: opts.quick === true,
      targets: opts.targets.split(","),
      baseline: opts.baseline,
    })
  : null;

/** console.table, leaving out a table with no rows (a run of some scenarios only). */
const table = (rows: object[]) => rows.length > 0 && console.table(rows);
const round = (n: number | null | undefined, d = 1) => (n === null || n === undefined || !Number.isFinite(n) ? null : Number(n.toFixed(d)));
table(
  reports.map((r) => ({
    target: r.target,
    scenario: r.scenario,
    ok: r.completed,
    failed:
      Object.entries(r.failed)
        .map(([code, f]) => `${code}:${f.count}@${f.meanTimeToFailureS.toFixed(0)}s`)
        .join(" ") || "",
    "req/s": round(r.requestThroughput, 2),
    "out tok/s": round(r.outputTokensPerS),
    "out/req": round(r.meanOutputTokens),
    "ttft p50": round(r.ttftMs.p50, 0),
    "ttft p99": round(r.ttftMs.p99, 0),
    "tpot mean": round(r.tpotMs.mean),
    "itl p50": round(r.itlMs.p50),
    "itl p99": round(r.itlMs.p99),
    "cache hit": round(r.prefixCacheHitRate, 2),
    "rss MB": round(r.peakRssMb, 0),
    // Our shards' decode time over the wall time (two shards busy all along make 2.0).
    "decode/wall": r.engine ? round(r.engine.decodeS / r.durationS, 2) : "",
    "ttft turn1/2+": r.ttftLaterTurnsMs ? `${round(r.ttftFirstTurnMs!.mean, 0)}/${round(r.ttftLaterTurnsMs.mean, 0)}` : "",
  })),
);

const find = (target: string, scenario: string) => reports.find((r) => r.target === target && r.scenario === scenario);
const tokensPerS = (target: string, scenario: string) => find(target, scenario)?.outputTokensPerS;
/** The faster of a target's two formats (the published file and its F16 re-encoding). */
const best = (target: string, scenario: string) => {
  const rates = [tokensPerS(target, scenario), tokensPerS(`${target}-f16`, scenario)].filter((r) => r !== undefined);
  return rates.length ? Math.max(...rates) : undefined;
};
const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined && b > 0 ? round(a / b, 2) : null);
const C16_NAME = "random 128/128 c16";
const C1_NAME = "random 128/128 c1";
const MIXED_BATCH = "mixed 20/50/30 saturating, batch underneath";
const ours = (scenario: string) => find("switchyard", scenario);
const peerOf = (scenario: string) => find("llama-server", scenario);
const ratios = {
  "c16 out tok/s vs llama-server (target >= 1.2)": ratio(tokensPerS("switchyard", C16_NAME), tokensPerS("llama-server", C16_NAME)),
  "F16, both: c16 out tok/s vs llama-server": ratio(tokensPerS("switchyard-f16", C16_NAME), tokensPerS("llama-server-f16", C16_NAME)),
  "c16 out tok/s, best format each: ours vs llama-server (target >= 1.2)": ratio(
    best("switchyard", C16_NAME),
    best("llama-server", C16_NAME),
  ),
  "same binaries (llama-server on node-llama-cpp's libraries): c16 out tok/s": ratio(
    tokensPerS("switchyard", C16_NAME),
    tokensPerS("llama-server-our-binaries", C16_NAME),
  ),
  "same binaries: c1 out tok/s": ratio(tokensPerS("switchyard", C1_NAME), tokensPerS("llama-server-our-binaries", C1_NAME)),
  "same binaries: OpenAI sampling c16 out tok/s": ratio(
    tokensPerS("switchyard", "openai sampling c16"),
    tokensPerS("llama-server-our-binaries", "openai sampling c16"),
  ),
  "same binaries: multiturn TTFT turns 2+": ratio(
    ours("multiturn 6 turns")?.ttftLaterTurnsMs?.mean,
    find("llama-server-our-binaries", "multiturn 6 turns")?.ttftLaterTurnsMs?.mean,
  ),
  "random c16 out tok/s, speculation auto vs off (target >= 0.98)": ratio(
    tokensPerS("switchyard", C16_NAME),
    tokensPerS("switchyard-spec-off", C16_NAME),
  ),
  "random c1 out tok/s, speculation auto vs off (target >= 1.0)": ratio(
    tokensPerS("switchyard", C1_NAME),
    tokensPerS("switchyard-spec-off", C1_NAME),
  ),
  ...(edit?.ratios() ?? {}),
  "c16 TTFT p50 vs llama-server (target <= 1)": ratio(ours(C16_NAME)?.ttftMs.p50, peerOf(C16_NAME)?.ttftMs.p50),
  "c16 ITL p99 vs llama-server (target <= 1)": ratio(ours(C16_NAME)?.itlMs.p99, peerOf(C16_NAME)?.itlMs.p99),
  "c1 TTFT p50 vs llama-server (target <= 1)": ratio(ours(C1_NAME)?.ttftMs.p50, peerOf(C1_NAME)?.ttftMs.p50),
  "this checkout vs --baseline: c1 TTFT p50": ratio(ours(C1_NAME)?.ttftMs.p50, find("switchyard-baseline", C1_NAME)?.ttftMs.p50),
  "this checkout vs --baseline: c16 out tok/s": ratio(tokensPerS("switchyard", C16_NAME), tokensPerS("switchyard-baseline", C16_NAME)),
  "c1 out tok/s vs llama-server (target >= 0.95)": ratio(tokensPerS("switchyard", C1_NAME), tokensPerS("llama-server", C1_NAME)),
  "c1 out tok/s, best format each: ours vs llama-server": ratio(best("switchyard", C1_NAME), best("llama-server", C1_NAME)),
  "OpenAI sampling, c16 out tok/s vs llama-server (target >= 1.2)": ratio(
    tokensPerS("switchyard", "openai sampling c16"),
    tokensPerS("llama-server", "openai sampling c16"),
  ),
  "OpenAI sampling, c1 out tok/s vs llama-server (target >= 0.95)": ratio(
    tokensPerS("switchyard", "openai sampling c1"),
    tokensPerS("llama-server", "openai sampling c1"),
  ),
  "one core busy, c16 out tok/s vs llama-server (target >= 1)": ratio(
    tokensPerS("switchyard", "random c16, one core busy"),
    tokensPerS("llama-server", "random c16, one core busy"),
  ),
  "shards vs one 2-thread context, c16 quiet": ratio(tokensPerS("switchyard", C16_NAME), tokensPerS("switchyard-1ctx", C16_NAME)),
  "shards vs one 2-thread context, c16 one core busy": ratio(
    tokensPerS("switchyard", "random c16, one core busy"),
    tokensPerS("switchyard-1ctx", "random c16, one core busy"),
  ),
  "c16 out tok/s vs llama-batched-bench S_TG (the ceiling)": ratio(tokensPerS("switchyard", C16_NAME), batched?.sTg),
  "c16 out tok/s vs llama-cpp-python": ratio(tokensPerS("switchyard", C16_NAME), tokensPerS("llama-cpp-python", C16_NAME)),
  "multiturn TTFT turns 2+ vs prefix cache off (target <= 0.5)": ratio(
    ours("multiturn 6 turns")?.ttftLaterTurnsMs?.mean,
    find("switchyard-no-prefix-cache", "multiturn 6 turns")?.ttftLaterTurnsMs?.mean,
  ),
  "multiturn TTFT turns 2+ vs llama-server (target <= 0.5)": ratio(
    ours("multiturn 6 turns")?.ttftLaterTurnsMs?.mean,
    peerOf("multiturn 6 turns")?.ttftLaterTurnsMs?.mean,
  ),
  "priority TTFT p99 loaded vs unloaded (target <= 2)": ratio(
    ours("mixed 20/50/30 saturating")?.byTier.priority?.ttftMs.p99,
    ours("priority unloaded")?.byTier.priority?.ttftMs.p99,
  ),
  "priority ITL p99 loaded vs unloaded (target <= 1.5)": ratio(
    ours("mixed 20/50/30 saturating")?.byTier.priority?.itlMs.p99,
    ours("priority unloaded")?.byTier.priority?.itlMs.p99,
  ),
  "priority TTFT p99 loaded vs its own load alone (isolation: 1)": ratio(
    ours("mixed 20/50/30 saturating")?.byTier.priority?.ttftMs.p99,
    ours("priority alone, 10 clients")?.byTier.priority?.ttftMs.p99,
  ),
  "priority ITL p99 loaded vs its own load alone (isolation: 1)": ratio(
    ours("mixed 20/50/30 saturating")?.byTier.priority?.itlMs.p99,
    ours("priority alone, 10 clients")?.byTier.priority?.itlMs.p99,
  ),
  ...Object.fromEntries(
    (["priority", "default", "flex"] as const).flatMap((tier) => [
      [
        `${tier} TTFT p99, batch underneath vs not (target <= 1.1)`,
        ratio(ours(MIXED_BATCH)?.byTier[tier]?.ttftMs.p99, ours("mixed 20/50/30 saturating")?.byTier[tier]?.ttftMs.p99),
      ],
      [
        `${tier} ITL p99, batch underneath vs not (target <= 1.1)`,
        ratio(ours(MIXED_BATCH)?.byTier[tier]?.itlMs.p99, ours("mixed 20/50/30 saturating")?.byTier[tier]?.itlMs.p99),
      ],
    ]),
  ),
  ...priorityBesideRatios(ours),
  ...adapterMixRatios(ours),
  ...Object.fromEntries(
    Object.entries(priorityBesideRatios((s) => find("switchyard-spec-off", s))).map(([what, value]) => [`speculation off, ${what}`, value]),
  ),
};
// Where our step loop's time goes, per step (ms): llama_decode, sampling, the messages to and from
// the runner thread, the main thread's planning and post-processing (the runner idles meanwhile),
// and what is left of the shards' wall time (idle, or waiting for the main thread: HTTP, SSE, GC).
table(
  reports
    .filter((r) => r.engine && r.engine.steps > 0)
    .map((r) => {
      const e = r.engine!;
      const perStep = (s: number) => round((s * 1000) / e.steps, 2);
      return {
        target: r.target,
        scenario: r.scenario,
        steps: e.steps,
        "tokens/step": round(e.tokensPerStep, 1),
        "setup ms": perStep(e.setupS),
        "decode ms": perStep(e.decodeS),
        "sample ms": perStep(e.sampleS),
        "messages ms": perStep(e.roundTripS - e.setupS - e.decodeS - e.sampleS),
        "host ms": perStep(e.hostS),
        "rest of wall ms": perStep(Math.max(0, e.shards * r.durationS - e.roundTripS - e.hostS)),
        "adapter turn steps": e.adapterTurnSteps,
      };
    }),
);
// Each model's share of a scenario that mixed models (adapter-mix: the base and its adapter).
table(
  reports.flatMap((r) =>
    Object.entries(r.byModel ?? {}).map(([model, m]) => ({
      target: r.target,
      scenario: r.scenario,
      model,
      ok: m.completed,
      failed: m.failed,
      "out tok/s": round(m.outputTokensPerS),
      "tpot mean": round(m.tpotMs.mean),
      "itl p50": round(m.itlMs.p50),
      "itl p99": round(m.itlMs.p99),
    })),
  ),
);
// Each tier's latencies wherever a scenario mixed tiers (or ran one alone).
table(
  reports.flatMap((r) =>
    Object.entries(r.byTier ?? {}).map(([tier, t]) => ({
      target: r.target,
      scenario: r.scenario,
      tier,
      "ttft p50": round(t.ttftMs.p50, 0),
      "ttft p99": round(t.ttftMs.p99, 0),
      "itl p50": round(t.itlMs.p50),
      "itl p99": round(t.itlMs.p99),
    })),
  ),
);
if (edit) {
  console.table(edit.tableRows());
  const exact = edit.exactness();
  if (exact) {
    console.log(`edit, temperature-0 outputs against ${exact.reference}:`);
    console.table(
      exact.rows.map(({ firstMismatch, mismatched, ...row }) => ({
        ...row,
        "first mismatch": firstMismatch ? `${firstMismatch.id} @${firstMismatch.at}` : "",
      })),
    );
  }
  const best = edit.toJSON().bestPeer;
  if (best.c1 || best.c8)
    console.log(
      `edit: llama-server's best --spec-type at c1: ${best.c1 ?? "-"}, at c8: ${best.c8 ?? "-"} (llama-server is --spec-type none)`,
    );
  const refused = edit.passes.find((p) => p.report.firstError);
  if (refused) console.log(`edit: ${refused.report.target} refused requests: ${refused.report.firstError}`);
}
const rssOver = (ours(C16_NAME)?.peakRssMb ?? NaN) - (peerOf(C16_NAME)?.peakRssMb ?? NaN);
const flexFailed = ours("mixed 20/50/30 saturating")?.byTier.flex?.failed;
// The ratios this run measured (the JSON has them all, null where a side did not run).
table(
  Object.entries(ratios)
    .filter(([, value]) => value !== null)
    .map(([what, value]) => ({ what, ratio: value })),
);
if (Number.isFinite(rssOver)) console.log(`server RSS at c16, ours minus llama-server's (target <= 300 MB): ${round(rssOver, 0)} MB`);
const batchLines = ours(MIXED_BATCH)?.batchLinesDone;
if (batchLines !== undefined) console.log(`batch lines answered underneath the tier mix: ${batchLines}`);
if (flexFailed !== undefined) console.log(`flex requests failed in the saturating mix (target 0 before their wait limit): ${flexFailed}`);
if (embeddings) {
  console.table(
    embeddings.results.map((r) => ({
      target: r.target,
      scenario: `embeddings ${r.scenario}`,
      "inputs/s": round(r.inputsPerS),
      "mean ms": round(r.latencyMs.mean),
      "p50 ms": round(r.latencyMs.p50),
      "p99 ms": round(r.latencyMs.p99),
      failed: r.failed,
    })),
  );
  console.table(Object.entries(embeddings.ratios).map(([what, value]) => ({ what, ratio: value })));
  skipped.push(...embeddings.skipped);
  for (const [target, variant] of Object.entries(embeddings.variants)) variants[`${target} (embeddings)`] = variant;
}
// Every target's distance to the hardware: its output tokens/s over the compute limit of its scenario's batch shape.
if (ceilings.size > 0) {
  console.log(`against llama-batched-bench on the same file and ${peer.threads} threads (limit: prefill at S_PP, then decode at S_TG):`);
  table(ceilingRows(reports, ceilings));
}
for (const line of skipped) console.log(`skipped ${line}`);
const cpu = cpuDescription();
console.log(`CPU: ${cpu.model}; flags: ${cpu.flags.join(" ")}`);
console.log(
  `ggml CPU variant loaded: ${Object.entries(variants)
    .map(([target, variant]) => `${target} ${variant ?? "unknown"}`)
    .join(", ")}`,
);

mkdirSync("bench/results", { recursive: true });
writeFileSync(
  `${opts.out}.json`,
  JSON.stringify(
    {
      at: new Date().toISOString(),
      cpu,
      variants,
      model: opts.model,
      modelPath,
      f16Path,
      threads: peer.threads,
      parallel: peer.parallel,
      reports,
      ratios,
      rssOverMb: rssOver,
      batchedBench: batched ? { sPp: batched.sPp, sTg: batched.sTg } : null,
      ceilings: Object.fromEntries(ceilings),
      embeddings,
      edit,
      skipped,
    },
    null,
    2,
  ),
);
const byScenario = [...new Set(reports.map((r) => r.scenario))];
writeFileSync(
  `${opts.out}.png`,
  barChartPng(`${opts.model}, ${peer.threads} threads`, [
    ...byScenario.map((s) => ({
      title: s,
      unit: "out tok/s",
      bars: reports.filter((r) => r.scenario === s).map((r) => ({ label: r.target, value: r.outputTokensPerS })),
    })),
    ...byScenario.map((s) => ({
      title: s,
      unit: "TTFT p50 ms",
      bars: reports.filter((r) => r.scenario === s).map((r) => ({ label: r.target, value: r.ttftMs.p50 })),
    })),
    ...(edit
      ? [1, 8].map((c) => ({
          title: `edit pass c${c}`,
          unit: "out tok/s",
          bars: edit.passes
            .filter((p) => p.report.pass === "edit" && p.report.concurrency === c)
            .map(({ report: r }) => ({
              label: `${r.target}${r.prediction && r.target.startsWith("switchyard") ? " +prediction" : ""}`,
              value: r.outputTokensPerS,
            })),
        }))
      : []),
  ]),
);
console.log(`wrote ${opts.out}.json and ${opts.out}.png`);
