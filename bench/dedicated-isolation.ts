/**
 * Issue 13: does a dedicated deployment's latency hold while the public pool of the same model is
 * saturated? One server, SmolLM2 public (16 sequences) and a deployment of it (one instance, its own
 * engine and sequences). Measured, one request at a time (c1):
 *
 *   deployment, alone              the baseline
 *   deployment, public at c16      what isolation is for
 *   public, public at c16          the same request without isolation (queues with the load)
 *
 * TTFT and ITL p50/p99 per case; a table, and JSON under bench/results/.
 *
 *   nice -n 10 node --import tsx bench/dedicated-isolation.ts [--requests 12] [--max-tokens 64] [--public-concurrency 16]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Command } from "commander";
import { streamChat, type RequestResult, type Target } from "./load/client-stream.js";
import { randomPrompts } from "./load/datasets.js";
import { summarize } from "./load/stats.js";
import { startSwitchyard } from "./peers/targets.js";

const MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct";

interface Options {
  requests: number;
  maxTokens: number;
  publicConcurrency: number;
  threads: number;
  port: number;
}

async function main(options: Options): Promise<void> {
  const server = await startSwitchyard({
    modelId: MODEL,
    modelPath: "",
    threads: options.threads,
    parallel: 16,
    contextPerSequence: 1024,
    port: options.port,
  });
  try {
    const deployment = await deploy(server.target);
    const dedicated: Target = { ...server.target, name: "deployment", model: deployment };
    const prompts = randomPrompts(options.requests * 3 + options.publicConcurrency * 50, 64, 7);
    let next = 0;
    const prompt = () => prompts[next++ % prompts.length]!;
    const sequential = async (target: Target) => {
      const results: RequestResult[] = [];
      for (let i = 0; i < options.requests; i++) results.push(await streamChat(target, prompt(), options.maxTokens, undefined));
      return results;
    };

    await sequential(dedicated); // warm-up: first requests load caches and threadpools
    const alone = await sequential(dedicated);
    const load = publicLoad(server.target, options.publicConcurrency, options.maxTokens * 2, prompt);
    await new Promise((r) => setTimeout(r, 3000)); // let the public queue fill
    const underLoad = await sequential(dedicated);
    const publicUnderLoad = await sequential(server.target);
    const background = await load.stop();

    const rows = [
      row("deployment, alone", alone),
      row(`deployment, public at c${options.publicConcurrency}`, underLoad),
      row(`public, public at c${options.publicConcurrency}`, publicUnderLoad),
    ];
    printTable(rows, background);
    mkdirSync("bench/results", { recursive: true });
    const file = `bench/results/dedicated-isolation-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
    writeFileSync(file, JSON.stringify({ options, cores: (await import("node:os")).availableParallelism(), rows, background }, null, 2));
    process.stdout.write(`\nwrote ${file}\n`);
  } finally {
    await server.stop();
  }
}

/** Creates a one-instance deployment (batch 4) and waits for it to run; returns its model id. */
async function deploy(target: Target): Promise<string> {
  const root = target.baseURL.replace(/\/v1\/compat$/, "");
  const headers = { authorization: `Bearer ${target.key}`, "content-type": "application/json" };
  const created = await (
    await fetch(`${root}/v1/deployments`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: MODEL, name: "bench", max_batch_size: 4 }),
    })
  ).json();
  for (let i = 0; i < 600; i++) {
    const d = await (await fetch(`${root}/v1/deployments/${created.id}`, { headers })).json();
    if (d.status === "running") return d.model_id as string;
    if (d.status === "failed") throw new Error(`the deployment failed: ${d.fail_reason}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("the deployment did not start in 2 minutes");
}

/** `concurrency` clients sending public requests back to back until stopped. */
function publicLoad(target: Target, concurrency: number, maxTokens: number, prompt: () => ReturnType<typeof randomPrompts>[number]) {
  let running = true;
  const results: RequestResult[] = [];
  const workers = Array.from({ length: concurrency }, async () => {
    while (running) results.push(await streamChat(target, prompt(), maxTokens, undefined));
  });
  const started = performance.now();
  return {
    async stop() {
      running = false;
      await Promise.all(workers);
      const seconds = (performance.now() - started) / 1000;
      const tokens = results.reduce((sum, r) => sum + r.outputTokens, 0);
      return {
        requests: results.length,
        failed: results.filter((r) => !r.ok).length,
        outputTokensPerSecond: Number((tokens / seconds).toFixed(1)),
      };
    },
  };
}

function row(name: string, results: RequestResult[]) {
  const ok = results.filter((r) => r.ok);
  const ttft = summarize(ok.map((r) => r.ttftMs ?? NaN));
  const itl = summarize(ok.flatMap((r) => r.itlMs));
  const round = (v: number) => Math.round(v * 10) / 10;
  return {
    name,
    requests: results.length,
    failed: results.length - ok.length,
    ttftP50: round(ttft.p50),
    ttftP99: round(ttft.p99),
    itlP50: round(itl.p50),
    itlP99: round(itl.p99),
  };
}

function printTable(rows: ReturnType<typeof row>[], background: { requests: number; failed: number; outputTokensPerSecond: number }): void {
  const header = ["case (c1 requests)", "n", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms"];
  const cells = rows.map((r) => [
    r.name,
    `${r.requests - r.failed}/${r.requests}`,
    String(r.ttftP50),
    String(r.ttftP99),
    String(r.itlP50),
    String(r.itlP99),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => `| ${c.map((v, i) => v.padEnd(widths[i]!)).join(" | ")} |`;
  process.stdout.write(`${[line(header), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n")}\n`);
  process.stdout.write(
    `public background load: ${background.requests} requests (${background.failed} failed), ${background.outputTokensPerSecond} output tok/s\n`,
  );
}

const program = new Command("dedicated-isolation")
  .option("--requests <n>", "c1 requests per case", (v) => Number(v), 12)
  .option("--max-tokens <n>", "max_tokens of the measured requests (public load: twice that)", (v) => Number(v), 64)
  .option("--public-concurrency <n>", "concurrent public requests saturating the pool", (v) => Number(v), 16)
  .option("--threads <n>", "llama.cpp threads per engine", (v) => Number(v), 2)
  .option("--port <n>", "port", (v) => Number(v), 18_400)
  .action(async (options: Options) => main(options));
await program.parseAsync(process.argv);
