/**
 * Ledger soak (issue 11): many streaming requests over the real model on PostgreSQL, a share of
 * which disconnect at random points, one `kill -9` of the server every `--kill-every` requests with
 * a restart on the same database and data dir, and one key whose budget runs close to its limit.
 * Then the ledger is reconciled against what every client saw:
 *   - every request the server answered has exactly one row (the primary key forbids doubles);
 *     requests refused with 402/429 have `rejected` rows; rows no client learned the id of are
 *     requests cut by a kill, and are `interrupted`;
 *   - completed rows bill exactly the usage the client was sent; every other row bills at least
 *     the tokens the client received (counted exactly, one logprobs entry per token);
 *   - no `in_flight` row and no budget reservation is left; the budget key's spend equals the sum
 *     of its rows' costs and stays within its budget;
 *   - the server's RSS when each run started and when it ended.
 *
 *   nice -n 10 node --import tsx bench/soak-ledger.ts [--requests 10000] [--kill-every 1000]
 *     [--disconnect 0.2] [--concurrency 16] [--budget-share 0.1] [--budget <USD>]
 *     [--postgres postgres://postgres@127.0.0.1:5432/postgres] [--out bench/results/soak-ledger.json]
 *
 * `--postgres` names the server whose admin database is used to create (and afterwards drop) a
 * throwaway database for the soak; `--budget` overrides the budget key's limit (default: what ~60%
 * of its share of the requests costs, so it runs into its limit part-way).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { addMoney, requestCost } from "../src/billing/cost.js";
import { sseData } from "./sse.js";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "10000" },
    "kill-every": { type: "string", default: "1000" },
    disconnect: { type: "string", default: "0.2" },
    concurrency: { type: "string", default: "16" },
    "budget-share": { type: "string", default: "0.1" },
    budget: { type: "string" },
    postgres: { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
    model: { type: "string", default: "HuggingFaceTB/SmolLM2-135M-Instruct" },
    out: { type: "string", default: "bench/results/soak-ledger.json" },
  },
});
const ROOT = resolve(import.meta.dirname, "..");
const CLI = join(ROOT, "bin/switchyard.js");
const PRICES = { input: "0.02", output: "0.06", cached_input: "0.01" }; // SmolLM2's standard prices in the catalog
const total = Number(values.requests);
const killEvery = Number(values["kill-every"]);
// About 1.5e-6 USD a request: the budget key can pay for ~60% of its share, so it runs at its limit.
const budgetUsd = values.budget ?? (0.6 * Number(values["budget-share"]) * total * 1.5e-6).toFixed(9);

interface ClientView {
  id: string | null;
  budgeted: boolean;
  disconnected: boolean;
  /** The connection broke without the client choosing it: the server was killed. */
  cut: boolean;
  status: number;
  tokensReceived: number;
  usage: { prompt_tokens: number; completion_tokens: number; estimated_cost: string } | null;
}

const admin = new pg.Client({ connectionString: values.postgres });
await admin.connect();
const dbName = `switchyard_soak_${Date.now()}`;
await admin.query(`CREATE DATABASE ${dbName}`);
const dbUrl = values.postgres.replace(/\/[^/]*$/, `/${dbName}`);
const dataDir = mkdtempSync(join(tmpdir(), "switchyard-soak-"));
const env = { ...process.env, SWITCHYARD_DATABASE_URL: dbUrl, SWITCHYARD_LOG_LEVEL: "warn" };
const key = cliLastLine(["keys", "create", "--account", "soak", "--data-dir", dataDir]);
const budgetKey = cliLastLine(["keys", "create", "--account", "soak-budget", "--budget", budgetUsd, "--data-dir", dataDir]);

const runs: Array<{ rss_start_mb: number; rss_end_mb: number; ended: "kill -9" | "SIGTERM" }> = [];
let server = await startServer();
let ready: Promise<void> = Promise.resolve();
const views: ClientView[] = [];
let next = 0;
let nextKillAt = killEvery;
const startedAt = performance.now();
await Promise.all(
  Array.from({ length: Number(values.concurrency) }, async () => {
    while (next < total) {
      await ready;
      const i = next++;
      if (i >= nextKillAt) {
        nextKillAt += killEvery;
        ready = restart();
        await ready;
      }
      views[i] = await oneRequest(i, Math.random() < Number(values.disconnect), Math.random() < Number(values["budget-share"]));
      if ((i + 1) % 200 === 0) process.stderr.write(`${i + 1}/${total}\n`);
    }
  }),
);
const seconds = (performance.now() - startedAt) / 1000;
await new Promise((r) => setTimeout(r, 1000)); // let the last disconnects settle
await stopServer(server, "SIGTERM");

const db = new pg.Client({ connectionString: dbUrl });
await db.connect();
const report = await reconcile(db);
console.log(JSON.stringify(report, null, 2));
mkdirSync(dirname(values.out), { recursive: true });
writeFileSync(values.out, JSON.stringify(report, null, 2));
await db.end();
await admin.query(`DROP DATABASE ${dbName} WITH (FORCE)`);
await admin.end();
rmSync(dataDir, { recursive: true, force: true });
process.exit(report.mismatches === 0 ? 0 : 1);

async function reconcile(ledger: pg.Client) {
  type Row = {
    request_id: string;
    key_id: string;
    status: string;
    prompt_tokens: number;
    cached_tokens: number;
    completion_tokens: number;
    cost: string;
  };
  const rows = (
    await ledger.query(
      "SELECT request_id, key_id, status, prompt_tokens, cached_tokens, completion_tokens, cost_usd::text AS cost FROM usage_records",
    )
  ).rows as Row[];
  const byId = new Map(rows.map((r) => [r.request_id, r]));
  const known = new Set(views.flatMap((v) => (v.id ? [v.id] : [])));
  const problems: string[] = [];
  const sums = {
    completedClientCost: "0",
    completedLedgerCost: "0",
    otherTokensReceived: 0,
    otherTokensBilled: 0,
    completedAfterClientLeft: 0,
  };
  for (const view of views.filter((v) => v.id)) {
    const row = byId.get(view.id!);
    if (!row) {
      problems.push(`no row for ${view.id}`);
      continue;
    }
    // An interrupted request that had delivered no token is not charged (see README, Crash recovery).
    const charged = row.status !== "interrupted" || row.completion_tokens > 0;
    const exact = charged
      ? requestCost(PRICES, {
          promptTokens: row.prompt_tokens,
          cachedPromptTokens: row.cached_tokens,
          completionTokens: row.completion_tokens,
        })
      : "0";
    if (Number(exact) !== Number(row.cost)) problems.push(`${row.request_id} costs ${row.cost}, its tokens ${exact}`);
    if (view.usage) {
      sums.completedClientCost = addMoney(sums.completedClientCost, view.usage.estimated_cost);
      sums.completedLedgerCost = addMoney(sums.completedLedgerCost, row.cost);
      if (
        row.status !== "completed" ||
        row.completion_tokens !== view.usage.completion_tokens ||
        Number(row.cost) !== Number(view.usage.estimated_cost)
      ) {
        problems.push(`${row.request_id}: completed with ${JSON.stringify(view.usage)}, row ${JSON.stringify(row)}`);
      }
    } else {
      sums.otherTokensReceived += view.tokensReceived;
      sums.otherTokensBilled += row.completion_tokens;
      if (row.completion_tokens < view.tokensReceived)
        problems.push(`${row.request_id}: billed ${row.completion_tokens} < received ${view.tokensReceived}`);
      // A client that left after the last token but before the usage chunk: the server had
      // finished, and bills the whole completion (at least what the client received, checked above).
      if (row.status === "completed") sums.completedAfterClientLeft++;
      else if (!["cancelled", "interrupted", "failed"].includes(row.status))
        problems.push(`${row.request_id}: unfinished client but row ${row.status}`);
    }
  }
  const refused = views.filter((v) => v.status === 402 || v.status === 429).length;
  const rejectedRows = rows.filter((r) => r.status === "rejected").length;
  if (rejectedRows !== refused) problems.push(`${rejectedRows} rejected rows for ${refused} refused requests`);
  const orphans = rows.filter((r) => !known.has(r.request_id) && r.status !== "rejected");
  const cutWithoutId = views.filter((v) => v.cut && !v.id).length;
  if (orphans.some((r) => r.status !== "interrupted")) problems.push("a row no client knows is not interrupted");
  if (orphans.length > cutWithoutId)
    problems.push(`${orphans.length} unknown rows but only ${cutWithoutId} requests cut before their first chunk`);
  const doubled = Number(
    (await ledger.query("SELECT count(*) AS n FROM (SELECT request_id FROM usage_records GROUP BY request_id HAVING count(*) > 1) d"))
      .rows[0].n,
  );
  if (doubled > 0) problems.push(`${doubled} request ids with more than one row`);
  const missing = [...known].filter((id) => !byId.has(id)).length;
  const inFlight = rows.filter((r) => r.status === "in_flight").length;
  const reservations = Number((await ledger.query("SELECT count(*) AS n FROM budget_reservations")).rows[0].n);
  const keyRow = (
    await ledger.query("SELECT id, spent_usd::text AS spent, budget_usd::text AS budget FROM api_keys WHERE budget_usd IS NOT NULL")
  ).rows[0] as { id: string; spent: string; budget: string };
  const budgetRowsCost = rows.filter((r) => r.key_id === keyRow.id).reduce((sum, r) => addMoney(sum, r.cost), "0");
  if (inFlight > 0) problems.push(`${inFlight} rows still in_flight`);
  if (reservations > 0) problems.push(`${reservations} reservations left`);
  if (Number(keyRow.spent) !== Number(budgetRowsCost)) problems.push(`budget key spent ${keyRow.spent}, its rows cost ${budgetRowsCost}`);
  if (Number(keyRow.spent) > Number(keyRow.budget)) problems.push(`budget key spent ${keyRow.spent} over its budget ${keyRow.budget}`);
  return {
    requests: total,
    seconds: Number(seconds.toFixed(1)),
    kills: runs.filter((r) => r.ended === "kill -9").length,
    disconnected: views.filter((v) => v.disconnected).length,
    cut_by_kill: views.filter((v) => v.cut).length,
    refused_402_429: refused,
    ledger_rows: rows.length,
    rows_for_answered_requests: views.filter((v) => v.id && byId.has(v.id)).length,
    answered_requests: known.size,
    rows_unknown_to_clients: orphans.length,
    // Admitted: answered with a stream (the client saw its id), or cut by a kill before its first
    // chunk yet recorded (the unknown rows); each has exactly one row, and refusals one `rejected` row.
    admitted_requests: known.size + orphans.length,
    rows_for_admitted_requests: rows.length - rejectedRows,
    rows_missing: missing,
    rows_doubled: doubled,
    statuses: rows.reduce<Record<string, number>>((acc, r) => {
      acc[r.status] = (acc[r.status] ?? 0) + 1;
      return acc;
    }, {}),
    completed: { client_cost_usd: sums.completedClientCost, ledger_cost_usd: sums.completedLedgerCost },
    unfinished: {
      tokens_received: sums.otherTokensReceived,
      tokens_billed: sums.otherTokensBilled,
      completed_after_client_left: sums.completedAfterClientLeft,
    },
    in_flight_rows_left: inFlight,
    reservations_left: reservations,
    budget_key: { budget_usd: keyRow.budget, spent_usd: keyRow.spent, rows_cost_usd: budgetRowsCost },
    rss_mb: { first_start: runs[0]?.rss_start_mb, last_end: runs.at(-1)?.rss_end_mb },
    server_runs: runs,
    mismatches: problems.length,
    problems: problems.slice(0, 20),
  };
}

async function oneRequest(i: number, disconnect: boolean, budgeted: boolean): Promise<ClientView> {
  const controller = new AbortController();
  const view: ClientView = { id: null, budgeted, disconnected: false, cut: false, status: 0, tokensReceived: 0, usage: null };
  const cutAfter = disconnect ? Math.floor(Math.random() * 12) : Infinity;
  try {
    const response = await fetch(`${server.url}/v1/compat/chat/completions`, {
      method: "POST",
      signal: controller.signal,
      headers: { authorization: `Bearer ${budgeted ? budgetKey : key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: values.model,
        messages: [{ role: "user", content: `Tell me about the number ${i}.` }],
        max_tokens: 4 + (i % 21),
        stream: true,
        stream_options: { include_usage: true },
        logprobs: true, // one entry per token: the exact count the client received
      }),
    });
    view.status = response.status;
    if (response.status !== 200) {
      await response.text();
      return view;
    }
    let chunks = 0;
    for await (const data of sseData(response.body as AsyncIterable<Uint8Array>)) {
      const costText = /"estimated_cost":([0-9.e-]+)/.exec(data)?.[1];
      const chunk = JSON.parse(data);
      view.id ??= chunk.id;
      view.tokensReceived += chunk.choices?.[0]?.logprobs?.content?.length ?? 0;
      if (chunk.choices?.[0]?.delta?.content) chunks++;
      if (chunk.usage) view.usage = { ...chunk.usage, estimated_cost: costText! };
      if (chunks > cutAfter) {
        view.disconnected = true;
        controller.abort();
        return view;
      }
    }
  } catch (error) {
    if (!view.disconnected) view.cut = true; // the server went away under us
    void error;
  }
  return view;
}

async function restart(): Promise<void> {
  await stopServer(server, "kill -9");
  server = await startServer();
}

async function startServer(): Promise<{ process: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [CLI, "serve", "--port", "0", "--data-dir", dataDir, "--models", values.model], {
    env,
    stdio: ["ignore", "inherit", "inherit"],
  });
  for (let i = 0; i < 1200; i++) {
    const file = join(dataDir, "server.json");
    if (child.exitCode !== null) throw new Error("the server exited while starting");
    if (existsSync(file)) {
      const { url, pid } = JSON.parse(readFileSync(file, "utf8"));
      const health = pid === child.pid ? await fetch(`${url}/health`).catch(() => undefined) : undefined;
      if (health?.status === 200) {
        runs.push({ rss_start_mb: rssMb(child.pid!), rss_end_mb: 0, ended: "SIGTERM" });
        return { process: child, url };
      }
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("server did not become ready");
}

async function stopServer(running: { process: ChildProcess }, how: "kill -9" | "SIGTERM"): Promise<void> {
  const run = runs.at(-1)!;
  run.rss_end_mb = rssMb(running.process.pid!);
  run.ended = how;
  const exited = new Promise((r) => running.process.once("exit", r));
  running.process.kill(how === "kill -9" ? "SIGKILL" : "SIGTERM");
  await exited;
}

function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Math.round(Number(kb) / 1024);
}

function cliLastLine(args: string[]): string {
  const result = spawnSync(process.execPath, [CLI, ...args], { env, encoding: "utf8" });
  if (result.status !== 0) throw new Error(result.stderr);
  return result.stdout.trim().split("\n").at(-1)!.trim();
}
