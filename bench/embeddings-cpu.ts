/**
 * CPU per embedding request, by thread: one server on all-MiniLM-L6-v2, one client (or `--clients n`,
 * each on its own kept-alive connection) sending short single-input requests one after another
 * (undici.request), and each of
 * the server's threads' CPU time (/proc/<pid>/task/<tid>/stat, utime + stime) read before and after
 * the timed requests. The main thread is the one whose id is the process id.
 *
 *   node --import tsx bench/embeddings-cpu.ts [--requests 1000 --log-level info]
 *   BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" node --import tsx bench/embeddings-cpu.ts
 *   BENCH_SERVER_NODE_ARGS="--perf-basic-prof-only-functions" node --import tsx bench/embeddings-cpu.ts --perf /tmp/main.perf
 *
 * --cpu-prof samples wall time: a thread preempted inside a call (a postMessage that wakes another
 * thread hands it the core) is charged to that call. perf's cpu-clock counts on-CPU time only.
 *
 * Prints a table (ms of CPU per request for each thread name, the main thread apart) and the
 * latency p50/p99; writes bench/results/embeddings-cpu-<time>.json.
 */
import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { Command } from "commander";
import { Agent, request } from "undici";
import { EMBEDDING_MODEL } from "./embeddings.js";
import { cpuDescription, cpuVariant, startSwitchyard } from "./peers/targets.js";

const opts = new Command()
  .option("--requests <n>", "timed requests", "1000")
  .option(
    "--warmup <n>",
    "untimed requests first (V8 tiers a function up by the bytecode it has run: a few hundred requests leave most of the path in its baseline tier)",
    "200",
  )
  .option("--clients <n>", "concurrent clients, each sending its share of the requests in turn", "1")
  .option("--threads <n>", "engine threads", "2")
  .option("--log-level <level>", "the server's SWITCHYARD_LOG_LEVEL", "info")
  .option("--env <pairs...>", "more server environment, NAME=value")
  .option("--perf <file>", "record the main thread's on-CPU stacks over the timed requests with Linux perf (cpu-clock) into this file")
  .option("--root <dir>", "run the server of another checkout, built")
  .option("--out <file>", "where the JSON goes", `bench/results/embeddings-cpu-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
  .parse()
  .opts<{
    requests: string;
    clients: string;
    warmup: string;
    threads: string;
    logLevel: string;
    env?: string[];
    perf?: string;
    root?: string;
    out: string;
  }>();

const TICK_MS = 1000 / 100; // USER_HZ: /proc's clock ticks are 1/100 s on Linux
const REQUESTS = Number(opts.requests);

/** Each thread's CPU ticks (utime + stime) and name. */
function threadTimes(pid: number): Map<number, { name: string; ticks: number }> {
  const out = new Map<number, { name: string; ticks: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(Number(tid), { name, ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/** perf record on the main thread alone (its thread id is the process id); stop() ends it with SIGINT, as perf expects. */
async function startPerf(file: string, pid: number): Promise<{ stop(): Promise<void> }> {
  const args = ["record", "-e", "cpu-clock", "-k", "mono", "-F", "1999", "-g", "-t", String(pid), "-o", file];
  const child = spawn("perf", args, { stdio: ["ignore", "ignore", "inherit"] });
  await new Promise((resolve) => setTimeout(resolve, 500));
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGINT");
      }),
  };
}

function sentence(i: number): string {
  return `A short sentence number ${i} about rivers, boats and the people who row them.`;
}

const extraEnv = Object.fromEntries((opts.env ?? []).map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]));
const server = await startSwitchyard(
  { modelId: EMBEDDING_MODEL, modelPath: "", threads: Number(opts.threads), parallel: 1, contextPerSequence: 512, port: 18700 },
  "switchyard",
  { SWITCHYARD_LOG_LEVEL: opts.logLevel, ...extraEnv },
  opts.root,
);
const pid = server.target.pid!;
const CLIENTS = Math.max(1, Number(opts.clients));
const agent = new Agent({ keepAliveTimeout: 60_000, connections: CLIENTS });
const url = `${server.target.baseURL}/embeddings`;
const headers = { authorization: `Bearer ${server.target.key}`, "content-type": "application/json" };

async function embed(i: number): Promise<number> {
  const started = performance.now();
  const response = await request(url, {
    method: "POST",
    dispatcher: agent,
    headers,
    body: JSON.stringify({ model: EMBEDDING_MODEL, input: sentence(i) }),
  });
  const body = (await response.body.json()) as { data: unknown[] };
  if (response.statusCode !== 200 || body.data.length !== 1) throw new Error(`HTTP ${response.statusCode}`);
  return performance.now() - started;
}

try {
  for (let i = 0; i < Number(opts.warmup); i++) await embed(-i - 1); // warm-up: JIT, caches, connections
  const perf = opts.perf ? await startPerf(opts.perf, pid) : undefined;
  const before = threadTimes(pid);
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      for (let i = next++; i < REQUESTS; i = next++) latencies.push(await embed(i));
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const after = threadTimes(pid);
  await perf?.stop();
  const byName = new Map<string, number>();
  for (const [tid, { name, ticks }] of after) {
    const used = ticks - (before.get(tid)?.ticks ?? 0);
    // Node names no thread but the main one apart: each other thread is listed by its id (creation order).
    const key = tid === pid ? "main" : `${name} ${tid}`;
    byName.set(key, (byName.get(key) ?? 0) + used);
  }
  const perRequest = Object.fromEntries(
    [...byName]
      .filter(([, ticks]) => ticks > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([name, ticks]) => [name, Number(((ticks * TICK_MS) / REQUESTS).toFixed(3))]),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Number(latencies[Math.floor(q * (latencies.length - 1))]!.toFixed(3));
  const result = {
    cpu: cpuDescription().model,
    variant: cpuVariant(pid),
    requests: REQUESTS,
    clients: CLIENTS,
    inputsPerS: Number((REQUESTS / seconds).toFixed(1)),
    warmup: Number(opts.warmup),
    logLevel: opts.logLevel,
    env: extraEnv,
    cpuMsPerRequest: perRequest,
    latencyMs: { p50: at(0.5), p99: at(0.99) },
  };
  console.table(Object.entries(perRequest).map(([thread, ms]) => ({ thread, "CPU ms / request": ms })));
  console.log(JSON.stringify(result));
  mkdirSync(dirname(opts.out), { recursive: true });
  writeFileSync(opts.out, JSON.stringify(result, null, 2));
} finally {
  await agent.close();
  await server.stop();
}
