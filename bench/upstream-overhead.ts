/**
 * The gateway's added latency in front of an upstream engine: llama-server called directly, and the
 * same llama-server behind our gateway (a catalog entry with a `backend`), side by side in one run.
 *
 *   bash bench/peers/build-llama-server.sh   # once
 *   npm run bench:upstream [-- --quick]
 *
 * c1: requests one at a time, alternating direct and gateway request by request (each prompt is
 * different, so neither gains from llama-server's prompt cache); TTFT and ITL p50/p99. c16: rounds
 * of 16 concurrent streams, alternating direct and gateway round by round; output tokens/s.
 * Prints a table; writes bench/results/upstream-overhead-<time>.json.
 *
 * A third side, a bare Node relay (peers/bare-relay.ts: undici's kept-alive pool, nothing read), is the
 * floor of one more Node hop on this machine: the gateway's time past it is ours.
 *
 * `--upstream instant`: instead of llama-server, an upstream that does no work (peers/instant-upstream.ts,
 * its first token `--instant-ttft-ms` after the request): what the gateway adds, without an engine's noise.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { streamChat, type RequestResult, type Target } from "./load/client-stream.js";
import { randomPrompts } from "./load/datasets.js";
import { summarize } from "./load/stats.js";
import { startBareRelay, startInstantUpstream, startLlamaServer, startSwitchyard, type PeerOptions } from "./peers/targets.js";

const opts = new Command()
  .option("--model <id>", "catalog id of the model", "HuggingFaceTB/SmolLM2-135M-Instruct")
  .option("--threads <n>", "llama-server threads", "2")
  .option("--quick", "a quarter of the requests (a smoke run)")
  .option(
    "--input-tokens <n>",
    "prompt length: a short prompt keeps llama-server's prefill, and its noise, small beside what the gateway adds",
    "128",
  )
  .option("--requests <n>", "c1 requests per target", "32")
  .option(
    "--pin",
    "llama-server (use --threads 1) on CPU 0, the gateway and this load generator on CPU 1 (Linux taskset): the gateway then has a core of its own",
  )
  .option(
    "--client-cpu <cpu>",
    "with --pin, the CPU of this load generator: 1 shares the gateway's core (the client's own work then delays the gateway's), 0 the upstream's (with --upstream instant it does no work, so the gateway has its core alone, as in front of remote clients)",
    "1",
  )
  .option("--upstream <kind>", "llama-server, or instant (no engine: a fixed TTFT and ITL)", "llama-server")
  .option("--instant-ttft-ms <ms>", "the instant upstream's TTFT (its 'prefill')", "20")
  .option("--root <dir>", "run the gateway of another checkout, built (this change against the last, one run each)")
  .option("--out <file>", "where the JSON goes", `bench/results/upstream-overhead-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
  .parse()
  .opts<{
    model: string;
    threads: string;
    inputTokens: string;
    requests: string;
    quick?: boolean;
    pin?: boolean;
    clientCpu: string;
    upstream: string;
    instantTtftMs: string;
    root?: string;
    out: string;
  }>();
if (!["llama-server", "instant"].includes(opts.upstream)) throw new Error(`--upstream: llama-server or instant, not '${opts.upstream}'`);
const scale = (n: number) => (opts.quick ? Math.max(2, Math.ceil(n / 4)) : n);
const C1_REQUESTS = scale(Number(opts.requests));
const C16_ROUNDS = scale(4);
const INPUT_TOKENS = Number(opts.inputTokens);
const OUTPUT_TOKENS = 64;

const peer: PeerOptions = {
  modelId: opts.model,
  modelPath: opts.upstream === "instant" ? "" : pulledPath(opts.model),
  threads: Number(opts.threads),
  parallel: 16,
  contextPerSequence: 1024,
  port: 18500,
};

const llama =
  opts.upstream === "instant" ? await startInstantUpstream(18500, Number(opts.instantTtftMs), 5, opts.model) : await startLlamaServer(peer);
if (!llama) throw new Error("llama-server is not built: run 'bash bench/peers/build-llama-server.sh'");
const catalogDir = mkdtempSync(join(tmpdir(), "switchyard-upstream-bench-"));
const catalog = join(catalogDir, "catalog.json");
writeFileSync(catalog, JSON.stringify({ models: [gatewayEntry(llama.target.baseURL)] }));
const gateway = await startSwitchyard({ ...peer, port: 18501 }, "gateway", { SWITCHYARD_CATALOG: catalog }, opts.root);
const relay = await startBareRelay(18502, llama);
const SIDES = ["direct", "relay", "gateway"] as const;
type Side = (typeof SIDES)[number];
const targets: Record<Side, Target> = { direct: llama.target, relay: relay.target, gateway: gateway.target };
if (opts.pin) {
  // Every thread of each process (-a), the ones started later included.
  const pin = (cpus: string, pid: number | undefined) =>
    execFileSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { stdio: "ignore" });
  pin("0", llama.target.pid);
  pin("1", gateway.target.pid);
  pin("1", relay.target.pid);
  pin(opts.clientCpu, process.pid);
}

try {
  const c1 = await runC1();
  const c16 = await runC16();
  report(c1, c16);
} finally {
  await gateway.stop();
  await relay.stop();
  await llama.stop();
}

async function runC1(): Promise<Record<string, RequestResult[]>> {
  const prompts = randomPrompts(C1_REQUESTS * SIDES.length + SIDES.length, INPUT_TOKENS, 11);
  // One warm-up each: connections open, caches and JIT warm.
  for (const name of SIDES) await streamChat(targets[name], prompts.pop()!, 8, undefined);
  const results: Record<string, RequestResult[]> = { direct: [], relay: [], gateway: [] };
  for (let i = 0; i < C1_REQUESTS; i++) {
    // Each side first, second and last in turn.
    for (const name of SIDES.map((_, k) => SIDES[(i + k) % SIDES.length]!)) {
      results[name]!.push(await streamChat(targets[name], prompts.pop()!, OUTPUT_TOKENS, undefined));
    }
  }
  return results;
}

async function runC16(): Promise<Record<string, { tokens: number; seconds: number; failed: number }>> {
  const prompts = randomPrompts(C16_ROUNDS * SIDES.length * 16, INPUT_TOKENS, 17);
  const totals = Object.fromEntries(SIDES.map((name) => [name, { tokens: 0, seconds: 0, failed: 0 }]));
  for (let round = 0; round < C16_ROUNDS * SIDES.length; round++) {
    const name = SIDES[round % SIDES.length]!;
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: 16 }, () => streamChat(targets[name], prompts.pop()!, OUTPUT_TOKENS, undefined)),
    );
    totals[name]!.seconds += (performance.now() - started) / 1000;
    totals[name]!.tokens += results.reduce((n, r) => n + r.outputTokens, 0);
    totals[name]!.failed += results.filter((r) => !r.ok).length;
  }
  return totals;
}

function report(c1: Record<string, RequestResult[]>, c16: Record<string, { tokens: number; seconds: number; failed: number }>): void {
  const rows = SIDES.map((name) => {
    const ok = c1[name]!.filter((r) => r.ok);
    const ttft = summarize(ok.map((r) => r.ttftMs!));
    const itl = summarize(ok.flatMap((r) => r.itlMs));
    const t = c16[name]!;
    return { name, ttft, itl, c1Failed: c1[name]!.length - ok.length, c16TokensPerSecond: t.tokens / t.seconds, c16Failed: t.failed };
  });
  const [direct, relayed, via] = rows as [(typeof rows)[number], (typeof rows)[number], (typeof rows)[number]];
  const label = { direct: `${opts.upstream} direct`, relay: `bare Node relay → ${opts.upstream}`, gateway: `gateway → ${opts.upstream}` };
  const added = (side: (typeof rows)[number], name: string) =>
    `added by the ${name}: TTFT p50 ${ms(side.ttft.p50 - direct.ttft.p50)} ms, p99 ${ms(side.ttft.p99 - direct.ttft.p99)} ms; ITL p50 ${ms(side.itl.p50 - direct.itl.p50)} ms, p99 ${ms(side.itl.p99 - direct.itl.p99)} ms; ` +
    `c16 throughput ${((side.c16TokensPerSecond / direct.c16TokensPerSecond) * 100).toFixed(1)}% of direct`;
  const ms = (v: number) => v.toFixed(2);
  const lines = [
    "| target | c1 TTFT p50 / p99 ms | c1 ITL p50 / p99 ms | c16 out tok/s | failures |",
    "|---|---|---|---|---|",
    ...rows.map(
      (r) =>
        `| ${label[r.name]} | ${ms(r.ttft.p50)} / ${ms(r.ttft.p99)} | ${ms(r.itl.p50)} / ${ms(r.itl.p99)} | ${r.c16TokensPerSecond.toFixed(1)} | ${r.c1Failed + r.c16Failed} |`,
    ),
    "",
    added(relayed, "bare relay (the floor of a Node hop here)"),
    added(via, "gateway"),
    `the gateway past the bare relay: TTFT p50 ${ms(via.ttft.p50 - relayed.ttft.p50)} ms`,
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
  mkdirSync("bench/results", { recursive: true });
  writeFileSync(
    opts.out,
    JSON.stringify(
      {
        at: new Date().toISOString(),
        model: opts.model,
        threads: peer.threads,
        pinned: opts.pin ?? false,
        clientCpu: opts.pin ? Number(opts.clientCpu) : null,
        upstream: opts.upstream,
        gatewayRoot: opts.root ?? null,
        ...(opts.upstream === "instant" ? { instantTtftMs: Number(opts.instantTtftMs) } : {}),
        c1Requests: C1_REQUESTS,
        c16Rounds: C16_ROUNDS,
        inputTokens: INPUT_TOKENS,
        outputTokens: OUTPUT_TOKENS,
        rows,
      },
      null,
      2,
    ),
  );
  process.stdout.write(`wrote ${opts.out}\n`);
}

function pulledPath(model: string): string {
  const listed = (
    JSON.parse(execFileSync(process.execPath, ["bin/switchyard.js", "models", "list", "--json"], { encoding: "utf8" })) as Array<{
      id: string;
      published_path: string | null;
    }>
  ).find((m) => m.id === model);
  if (!listed?.published_path) throw new Error(`${model} is not pulled: run 'npx switchyard models pull'`);
  return listed.published_path;
}

/** The model, served by the llama-server above: the gateway keeps auth, tiers and metering. */
function gatewayEntry(baseURL: string) {
  return {
    id: opts.model,
    backend: { type: "openai", replicas: [baseURL], model: "smollm2", max_concurrency: 16 },
    context_length: 1024,
    precision: "q4_1",
    tags: ["JSON", "Function"],
    pricing: { input: "0.02", output: "0.06", cached_input: "0.01" },
    created: 1738886400,
  };
}
