/**
 * Ledger soak: many streaming requests, a share of which disconnect at random points, then a
 * reconciliation of the ledger against what every client saw. Starts its own server on a fresh
 * PostgreSQL database so it can read the ledger row of each request by its id.
 *
 *   node --import tsx bench/soak-ledger.ts [--requests 2000] [--disconnect 0.2] [--concurrency 16]
 *     [--postgres postgres://postgres@127.0.0.1:5432/postgres] [--out bench/results/soak-ledger.json]
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, existsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { addMoney, requestCost } from "../src/billing/cost.js";
import { sseData } from "./sse.js";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "2000" },
    disconnect: { type: "string", default: "0.2" },
    concurrency: { type: "string", default: "16" },
    postgres: { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
    model: { type: "string", default: "HuggingFaceTB/SmolLM2-135M-Instruct" },
    out: { type: "string", default: "bench/results/soak-ledger.json" },
  },
});
const ROOT = resolve(import.meta.dirname, "..");
const CLI = join(ROOT, "bin/switchyard.js");
const PRICES = { input: "0.02", output: "0.06", cached_input: "0.01" }; // SmolLM2's standard prices in the catalog

interface ClientView {
  id: string | null;
  disconnected: boolean;
  contentChunks: number;
  usage: { prompt_tokens: number; completion_tokens: number; estimated_cost: string } | null;
}

const admin = new pg.Client({ connectionString: values.postgres });
await admin.connect();
const dbName = `switchyard_soak_${Date.now()}`;
await admin.query(`CREATE DATABASE ${dbName}`);
const dbUrl = values.postgres.replace(/\/[^/]*$/, `/${dbName}`);
const dataDir = mkdtempSync(join(tmpdir(), "switchyard-soak-"));
const env = { ...process.env, SWITCHYARD_DATABASE_URL: dbUrl, SWITCHYARD_LOG_LEVEL: "warn" };
const key = spawnSyncLastLine(["keys", "create", "--account", "soak", "--data-dir", dataDir], env);
const server = spawn(process.execPath, [CLI, "serve", "--port", "0", "--data-dir", dataDir, "--models", values.model], { env, stdio: "inherit" });
const url = await waitForServer(dataDir);

const total = Number(values.requests);
const views: ClientView[] = [];
let next = 0;
const startedAt = performance.now();
await Promise.all(Array.from({ length: Number(values.concurrency) }, async () => {
  while (next < total) {
    const i = next++;
    views[i] = await oneRequest(i, Math.random() < Number(values.disconnect));
    if ((i + 1) % 200 === 0) process.stderr.write(`${i + 1}/${total}\n`);
  }
}));
const seconds = (performance.now() - startedAt) / 1000;
await new Promise((r) => setTimeout(r, 1000)); // let the last disconnects settle

const ledger = new pg.Client({ connectionString: dbUrl });
await ledger.connect();
const rows = (await ledger.query("SELECT request_id, status, prompt_tokens, completion_tokens, cost_usd::text AS cost FROM usage_records")).rows as Array<{ request_id: string; status: string; prompt_tokens: number; completion_tokens: number; cost: string }>;
const byId = new Map(rows.map((r) => [r.request_id, r]));

let mismatches = 0;
const sums = { clientTokens: 0, clientCost: "0", ledgerTokensCompleted: 0, ledgerCostCompleted: "0", ledgerTokensCancelled: 0, ledgerCostCancelled: "0", deliveredChunksCancelled: 0 };
for (const view of views) {
  const row = view.id ? byId.get(view.id) : undefined;
  if (!row) {
    mismatches++;
    continue;
  }
  const exact = requestCost(PRICES, { promptTokens: row.prompt_tokens, cachedPromptTokens: 0, completionTokens: row.completion_tokens });
  if (exact !== row.cost.replace(/\.?0+$/, "") && exact !== row.cost) mismatches++;
  if (view.usage) {
    sums.clientTokens += view.usage.prompt_tokens + view.usage.completion_tokens;
    sums.clientCost = addMoney(sums.clientCost, view.usage.estimated_cost);
    sums.ledgerTokensCompleted += row.prompt_tokens + row.completion_tokens;
    sums.ledgerCostCompleted = addMoney(sums.ledgerCostCompleted, row.cost);
    if (row.status !== "completed" || row.completion_tokens !== view.usage.completion_tokens) mismatches++;
  } else {
    sums.ledgerTokensCancelled += row.prompt_tokens + row.completion_tokens;
    sums.ledgerCostCancelled = addMoney(sums.ledgerCostCancelled, row.cost);
    sums.deliveredChunksCancelled += view.contentChunks;
    // Each delivered content chunk is at least one generated token; a row may bill tokens still held back.
    if (row.completion_tokens < view.contentChunks) mismatches++;
  }
}
const report = {
  requests: total,
  disconnected: views.filter((v) => v.disconnected).length,
  seconds: Number(seconds.toFixed(1)),
  ledger_rows: rows.length,
  rows_missing: views.filter((v) => !v.id || !byId.has(v.id)).length,
  rows_extra: rows.length - new Set(views.map((v) => v.id)).size,
  statuses: rows.reduce<Record<string, number>>((acc, r) => ((acc[r.status] = (acc[r.status] ?? 0) + 1), acc), {}),
  completed: { client_tokens: sums.clientTokens, ledger_tokens: sums.ledgerTokensCompleted, client_cost_usd: sums.clientCost, ledger_cost_usd: sums.ledgerCostCompleted },
  disconnected_billing: { ledger_tokens: sums.ledgerTokensCancelled, ledger_cost_usd: sums.ledgerCostCancelled, content_chunks_delivered: sums.deliveredChunksCancelled },
  mismatches,
};
console.log(JSON.stringify(report, null, 2));
mkdirSync(dirname(values.out), { recursive: true });
writeFileSync(values.out, JSON.stringify(report, null, 2));

server.kill("SIGTERM");
await new Promise((r) => server.once("exit", r));
await ledger.end();
await admin.query(`DROP DATABASE ${dbName} WITH (FORCE)`);
await admin.end();
process.exit(mismatches === 0 && report.rows_missing === 0 && report.rows_extra === 0 ? 0 : 1);

async function oneRequest(i: number, disconnect: boolean): Promise<ClientView> {
  const controller = new AbortController();
  const view: ClientView = { id: null, disconnected: false, contentChunks: 0, usage: null };
  const cutAfter = disconnect ? Math.floor(Math.random() * 12) : Infinity;
  const response = await fetch(`${url}/v1/compat/chat/completions`, {
    method: "POST",
    signal: controller.signal,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: values.model,
      messages: [{ role: "user", content: `Tell me about the number ${i}.` }],
      max_tokens: 4 + (i % 21),
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  try {
    for await (const data of sseData(response.body as AsyncIterable<Uint8Array>)) {
      const costText = /"estimated_cost":([0-9.]+)/.exec(data)?.[1];
      const chunk = JSON.parse(data);
      view.id ??= chunk.id;
      if (chunk.choices?.[0]?.delta?.content) view.contentChunks++;
      if (chunk.usage) view.usage = { ...chunk.usage, estimated_cost: costText! };
      if (view.contentChunks > cutAfter) {
        view.disconnected = true;
        controller.abort();
        return view;
      }
    }
  } catch (error) {
    if (!view.disconnected) throw error;
  }
  return view;
}

function spawnSyncLastLine(args: string[], env: NodeJS.ProcessEnv): string {
  const result = spawnSync(process.execPath, [CLI, ...args], { env, encoding: "utf8" });
  if (result.status !== 0) throw new Error(result.stderr);
  return result.stdout.trim().split("\n").at(-1)!.trim();
}

async function waitForServer(dir: string): Promise<string> {
  for (let i = 0; i < 600; i++) {
    const file = join(dir, "server.json");
    if (existsSync(file)) {
      const { url } = JSON.parse(readFileSync(file, "utf8"));
      const health = await fetch(`${url}/health`).catch(() => undefined);
      if (health?.status === 200) return url;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("server did not become ready");
}
