import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { compareMoney } from "../../src/billing/cost.js";
import type { Database } from "../../src/storage/database.js";
import { createTestDatabase, serverDatabaseReader, type TestDatabase } from "../helpers/databases.js";
import { MINILM } from "../helpers/embeddings.js";
import { createKey, emptyDataDir, startServer, waitFor, type RunningServer } from "../helpers/server.js";

/**
 * Embeddings through kill -9: an embedding's answer goes out whole, at the end, so it is billed
 * exactly when it was answered. Killed the moment its answer arrived, it is billed (a key with a
 * budget wrote its row before the answer; one without, a line in the ledger's journal, which the
 * restart writes to the table before it serves: killed within the 20 ms before that line's row is
 * written, as here, the restart bills it); killed while it ran, it is not (a key with a budget leaves its
 * in-flight row, closed at cost 0 by the restart and its reservation released; a key without one
 * wrote no row). With a budget and without, on PGlite and PostgreSQL.
 */
const ACCOUNTS = { budgeted: "embed-crash-budgeted", free: "embed-crash-free" } as const;
type Which = keyof typeof ACCOUNTS;
const WHICH = Object.keys(ACCOUNTS) as Which[];

/** 2,048 inputs of about 50 tokens each: seconds of work, so the kill lands while it runs. */
const LONG_REQUEST = Array.from({ length: 2048 }, (_, i) => `${"a lighthouse keeper writes a long letter about the sea ".repeat(5)}${i}`);

const embed = (server: RunningServer, key: string, input: string | string[], signal?: AbortSignal) =>
  fetch(`${server.url}/v1/compat/embeddings`, {
    method: "POST",
    signal,
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: MINILM, input }),
  });

async function killHard(server: RunningServer): Promise<void> {
  const exited = new Promise((resolve) => server.process.once("exit", resolve));
  server.process.kill("SIGKILL");
  await exited;
}

interface Ledger {
  rows: Array<{ request_id: string; status: string; cost: string }>;
  spent: string;
}

/** The account's embeddings rows and its key's spend; and the reservations left in all. */
async function ledgerOf(db: Database, account: string): Promise<Ledger> {
  const [key] = await db.query<{ id: string; spent: string }>(
    "SELECT k.id, k.spent_usd::text AS spent FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE a.name = $1",
    [account],
  );
  const rows = await db.query<Ledger["rows"][number]>(
    "SELECT request_id, status, cost_usd::text AS cost FROM usage_records WHERE key_id = $1 AND api = 'embeddings' ORDER BY created_at",
    [key!.id],
  );
  return { rows, spent: key!.spent };
}

for (const kind of ["pglite", "postgres"] as const) {
  describe(`embeddings through kill -9, on ${kind}`, () => {
    const dataDir = kind === "pglite" ? emptyDataDir("switchyard-embed-crash-") : mkdtempSync(join(tmpdir(), "switchyard-embed-crash-"));
    let database: TestDatabase | undefined;
    let env: NodeJS.ProcessEnv = {};
    let server: RunningServer | undefined;
    const keys = {} as Record<Which, string>;
    /** What each answered request's usage said it cost, by request id. */
    const answered = new Map<string, { which: Which; cost: string }>();
    const withDb = serverDatabaseReader(dataDir, () => database);

    before(async () => {
      if (kind === "postgres") {
        database = await createTestDatabase("postgres");
        env = { SWITCHYARD_DATABASE_URL: database.url };
      }
      keys.budgeted = createKey(dataDir, ACCOUNTS.budgeted, ["--budget", "1"], env);
      keys.free = createKey(dataDir, ACCOUNTS.free, [], env);
      server = await startServer({ dataDir, key: keys.free, env, models: [MINILM] });
    });
    after(async () => {
      await server?.stop();
      await database?.dispose();
      rmSync(dataDir, { recursive: true, force: true });
    });

    test("killed the moment their answers arrived, both keys' embeddings are billed exactly what the answers said", async () => {
      await Promise.all(
        WHICH.map(async (which) => {
          const response = await embed(server!, keys[which], `a short sentence for the ${which} key`);
          assert.equal(response.status, 200);
          // The exact decimal as written (JSON.parse would make it a float).
          const cost = /"estimated_cost":([0-9.]+)/.exec(await response.text())?.[1];
          const requestId = response.headers.get("x-request-id");
          assert.ok(requestId && cost, "the answer names its request and its cost");
          answered.set(requestId, { which, cost });
        }),
      );
      await killHard(server!);
      server = await startServer({ dataDir, key: keys.free, env, models: [MINILM] });
    });

    test("killed while they run, neither is billed: no row without a budget, an interrupted row at cost 0 with one, no reservation left", async () => {
      const controller = new AbortController();
      const running = WHICH.map((which) => embed(server!, keys[which], LONG_REQUEST, controller.signal).catch(() => undefined));
      // Both admitted and queued: more inputs wait than one request has.
      await waitFor(async () => {
        const health = (await (await fetch(`${server!.url}/health`)).json()) as {
          models: Array<{ id: string; embeddings?: { waitingInputs: number } }>;
        };
        const waiting = health.models.find((m) => m.id === MINILM)?.embeddings?.waitingInputs ?? 0;
        return waiting > LONG_REQUEST.length ? true : undefined;
      }, 60_000);
      await killHard(server!);
      controller.abort();
      await Promise.all(running);
      // The restart closes the dead process's rows (PostgreSQL is read while it runs, PGlite after).
      server = await startServer({ dataDir, key: keys.free, env, models: [MINILM] });
      if (!database) await server.stop();
      const ledgers = await withDb(async (db) => ({
        budgeted: await ledgerOf(db, ACCOUNTS.budgeted),
        free: await ledgerOf(db, ACCOUNTS.free),
        reservations: Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM budget_reservations"))[0]!.n),
      }));
      for (const which of WHICH) {
        const { rows, spent } = ledgers[which];
        const [answer] = [...answered].filter(([, a]) => a.which === which);
        const [requestId, { cost }] = answer!;
        const completed = rows.find((r) => r.request_id === requestId);
        assert.equal(completed?.status, "completed", `${which}: the answered request's row`);
        assert.equal(compareMoney(completed!.cost, cost), 0, `${which}: billed ${completed!.cost}, the answer said ${cost}`);
        assert.equal(compareMoney(spent, cost), 0, `${which}: the key spent ${spent}, answered ${cost}`);
        const killed = rows.filter((r) => r.request_id !== requestId);
        if (which === "free") assert.deepEqual(killed, [], "no row for the unbudgeted request that never answered");
        else {
          assert.equal(killed.length, 1, JSON.stringify(rows));
          assert.equal(killed[0]!.status, "interrupted");
          assert.equal(Number(killed[0]!.cost), 0);
        }
      }
      assert.equal(ledgers.reservations, 0, "no reservation is left");
    });
  });
}
