import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { requestCost } from "../../src/billing/cost.js";
import { BATCH_PRICES, chatLine, resultLines, settled, upload } from "../helpers/batches.js";
import { createTestDatabase, type TestDatabase } from "../helpers/databases.js";
import { createKey, startServer, waitFor, type RunningServer } from "../helpers/server.js";

/**
 * A batch survives kill -9: the restarted server adopts it, unbills the attempts the crash cut
 * short (and any billed but not yet answered), runs the rest, and each line is answered exactly
 * once. The ledger then holds exactly what the output file delivers. A batch past its window ends
 * `expired`: what was done, and the rest as batch_expired errors, unbilled.
 */
const LINES = 16;

interface LedgerRow {
  request_id: string;
  status: string;
  cost_usd: string;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
}

describe("batches across kill -9 and a restart, on PostgreSQL", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-batch-crash-"));
  let database: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let server: RunningServer | undefined;
  let key = "";
  const client = () => new OpenAI({ apiKey: key, baseURL: server!.baseURL, timeout: 180_000, maxRetries: 0 });
  const ledger = (batchId: string) =>
    database.db.query<LedgerRow>(
      "SELECT request_id, status, cost_usd::text AS cost_usd, prompt_tokens, cached_tokens, completion_tokens FROM usage_records WHERE batch_id = $1",
      [batchId],
    );

  before(async () => {
    database = await createTestDatabase("postgres");
    env = { SWITCHYARD_DATABASE_URL: database.url };
    key = createKey(dataDir, "batcher", ["--budget", "10"], env);
    server = await startServer({ dataDir, key, env });
  });
  after(async () => {
    await server?.stop();
    await database?.dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("killed mid-batch and restarted: every line answered once, the ledger is the output file", async () => {
    const input = await upload(
      client(),
      Array.from({ length: LINES }, (_, i) => chatLine(`line-${i}`, `Tell a short story about a fox named ${i}.`, 40)),
    );
    const created = await client().batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await waitFor(async () => {
      const batch = await client().batches.retrieve(created.id);
      return batch.request_counts!.completed >= 3 ? batch : undefined;
    }, 240_000);
    const killed = new Promise((resolve) => server!.process.once("exit", resolve));
    server!.process.kill("SIGKILL");
    await killed;
    const beforeRestart = await ledger(created.id);
    assert.ok(
      beforeRestart.some((r) => r.status === "in_flight"),
      "the kill cut lines short mid-generation",
    );

    // The restart already has the 3 s window of the expiry test below (which once restarted the server
    // again for it): a batch's window is fixed when it is created, so this one keeps its 24 h.
    server = await startServer({ dataDir, key, env: { ...env, SWITCHYARD_BATCH_WINDOW_SECONDS: "3" } });
    const batch = await settled(client(), created.id);
    assert.equal(batch.status, "completed");
    assert.deepEqual(batch.request_counts, { total: LINES, completed: LINES, failed: 0 });
    const output = await resultLines(client(), batch.output_file_id);
    assert.deepEqual(
      output.map((l) => l.custom_id).sort(),
      Array.from({ length: LINES }, (_, i) => `line-${i}`).sort(),
      "each line answered exactly once",
    );
    assert.equal(batch.error_file_id, null);

    const rows = await ledger(created.id);
    assert.ok(!rows.some((r) => r.status === "in_flight"), "no row is left in flight");
    const billed = rows.filter((r) => Number(r.cost_usd) > 0);
    assert.deepEqual(
      billed.map((r) => r.request_id).sort(),
      output.map((l) => l.response!.request_id).sort(),
      "billed rows are exactly the delivered answers",
    );
    for (const row of billed) {
      assert.equal(row.status, "completed");
      assert.equal(
        Number(row.cost_usd),
        Number(
          requestCost(BATCH_PRICES, {
            promptTokens: row.prompt_tokens,
            cachedPromptTokens: row.cached_tokens,
            completionTokens: row.completion_tokens,
          }),
        ),
      );
    }
    for (const row of rows.filter((r) => r.status === "interrupted"))
      assert.equal(Number(row.cost_usd), 0, "an attempt the crash cut short is not billed");
    const [spent] = await database.db.query<{ spent: string; reservations: string }>(
      "SELECT k.spent_usd::text AS spent, (SELECT count(*) FROM budget_reservations r WHERE r.key_id = k.id)::text AS reservations FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE a.name = 'batcher'",
    );
    assert.equal(Number(spent!.reservations), 0, "no budget reservation is left");
    const total = billed.reduce((sum, r) => sum + Number(r.cost_usd), 0);
    assert.ok(Math.abs(Number(spent!.spent) - total) < 1e-12, `the key spent ${spent!.spent}, the output's lines cost ${total}`);
  });

  test("past its window a batch expires: the done lines, and the rest as batch_expired errors, unbilled", async () => {
    const input = await upload(
      client(),
      Array.from({ length: 40 }, (_, i) => chatLine(`late-${i}`, `Write a long poem about the sea, number ${i}.`, 64)),
    );
    const created = await client().batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const batch = await settled(client(), created.id);
    assert.equal(batch.status, "expired");
    assert.equal(typeof batch.expired_at, "number");
    const output = await resultLines(client(), batch.output_file_id);
    const errors = await resultLines(client(), batch.error_file_id);
    assert.ok(errors.length > 0 && errors.every((l) => l.error?.code === "batch_expired" && l.response === null));
    assert.equal(output.length + errors.length, 40, "each line once");
    assert.deepEqual(batch.request_counts, { total: 40, completed: output.length, failed: errors.length });
    const billed = (await ledger(created.id)).filter((r) => Number(r.cost_usd) > 0);
    assert.deepEqual(
      billed.map((r) => r.request_id).sort(),
      output.map((l) => l.response!.request_id).sort(),
      "only the done lines are billed",
    );
  });
});
