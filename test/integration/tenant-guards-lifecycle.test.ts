import assert from "node:assert/strict";
import { chmodSync, lstatSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createTestDatabase, serverDatabaseReader, type TestDatabase } from "../helpers/databases.js";
import { openAiError } from "../helpers/raw-http.js";
import {
  createKey,
  postChat,
  readSseTimed,
  SMOLLM2,
  startServer,
  FULL_CONTEXT,
  waitFor,
  type RunningServer,
  type TimedEvent,
  SMOLLM2_NO_END,
  emptyDataDir,
} from "../helpers/server.js";

/**
 * Issue 20, items 5 (a response that cannot be stored is not billed as completed), 7 (the data dir
 * is private) and 9 (graceful shutdown), on a real server.
 */

/** Every path under `dir` (itself included) with its permission bits. */
function modes(dir: string): Array<{ path: string; dir: boolean; mode: number }> {
  const out: Array<{ path: string; dir: boolean; mode: number }> = [];
  const visit = (path: string) => {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return;
    out.push({ path, dir: stat.isDirectory(), mode: stat.mode & 0o777 });
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(dir);
  return out;
}

const notPrivate = (dir: string) =>
  modes(dir)
    .filter((e) => e.mode !== (e.dir ? 0o700 : 0o600))
    .map((e) => `${e.mode.toString(8)} ${e.path}`);

describe("item 7: the data dir is private (dirs 0700, files 0600)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-perms-"));
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  test("a fresh data dir, after serving a request, holds nothing other users can read or write", async () => {
    const server = await startServer({ dataDir });
    const response = await postChat(server, { model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 });
    assert.equal(response.status, 200, await response.text());
    // While it runs, the data dir itself keeps everyone else out of everything below it.
    assert.equal(lstatSync(dataDir).mode & 0o777, 0o700);
    assert.equal(lstatSync(join(dataDir, "db")).mode & 0o777, 0o700);
    await server.stop();
    assert.ok(modes(join(dataDir, "db")).length > 100, "the database's files are there");
    assert.deepEqual(notPrivate(dataDir), []);
  });

  test("files an earlier version left world-writable (0666, dirs 0777) are made private at start", async () => {
    for (const entry of modes(dataDir)) chmodSync(entry.path, entry.dir ? 0o777 : 0o666);
    const key = createKey(dataDir, "again");
    for (const entry of modes(dataDir)) chmodSync(entry.path, entry.dir ? 0o777 : 0o666);
    const existing = modes(dataDir).map((e) => e.path);
    const server = await startServer({ dataDir, key });
    try {
      const stillOpen = modes(dataDir).filter((e) => existing.includes(e.path) && e.mode !== (e.dir ? 0o700 : 0o600));
      // A file PGlite creates while running has mode 0666 until the next start or stop; the data dir's own 0700 keeps others out meanwhile.
      assert.equal(lstatSync(dataDir).mode & 0o777, 0o700);
      assert.deepEqual(
        stillOpen.map((e) => e.path),
        [],
      );
    } finally {
      await server.stop();
    }
    assert.deepEqual(notPrivate(dataDir), []);
  });
});

describe("item 5: a response that cannot be stored is answered with an error and its row is not billed as completed [postgres]", () => {
  let database: TestDatabase;
  let server: RunningServer;
  before(async () => {
    database = await createTestDatabase("postgres");
    server = await startServer({ env: { SWITCHYARD_DATABASE_URL: database.url } });
  });
  after(async () => {
    await server?.stop();
    await database?.dispose();
  });

  test("storage fails after generation (a real database refusing the insert): 500, and the ledger row says failed", async () => {
    // The fault: the database itself refuses to store any response.
    await database.db.query(
      `CREATE FUNCTION refuse_response() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no room'; END $$`,
    );
    await database.db.query(`CREATE TRIGGER refuse_response BEFORE INSERT ON responses FOR EACH ROW EXECUTE FUNCTION refuse_response()`);
    const response = await fetch(`${server.baseURL}/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: SMOLLM2, input: "Say hi.", max_output_tokens: 4 }),
    });
    const text = await response.text();
    assert.equal(response.status, 500, text);
    assert.ok(openAiError(text), text);
    const id = response.headers.get("x-request-id");
    assert.match(id ?? "", /^resp_/);
    const rows = await database.db.query<{ status: string; error_code: string | null }>(
      "SELECT status, error_code FROM usage_records WHERE request_id = $1",
      [id],
    );
    assert.deepEqual(rows, [{ status: "failed", error_code: "response_not_stored" }]);
  });
});

interface StreamOutcome {
  id: string;
  events: TimedEvent[];
  contentChunks: number;
}

describe("item 9: SIGTERM drains: running streams finish or end with an error event, new requests get 503", () => {
  const dataDir = emptyDataDir("switchyard-drain-");
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  test("12 streams in flight: the short ones finish, the long ones get an error event and [DONE]; rows say what each client got", async () => {
    const DRAIN_MS = 25_000;
    const SHORT = 48;
    const server = await startServer({
      dataDir,
      env: { ...FULL_CONTEXT, SWITCHYARD_DRAIN_TIMEOUT_MS: String(DRAIN_MS), SWITCHYARD_PARALLEL: "12" },
    });
    const exited = new Promise<number | null>((resolve) => server.process.once("exit", resolve));
    // End-of-text banned, so each runs to its max_tokens: even-numbered streams far beyond the drain, odd ones well within it.
    const isLong = (i: number) => i % 2 === 0;
    let firstContent = 0;
    const streams = Array.from({ length: 12 }, async (_, i): Promise<StreamOutcome> => {
      const response = await postChat(server, {
        model: SMOLLM2,
        messages: [{ role: "user", content: `Tell story number ${i} about a lighthouse.` }],
        max_tokens: isLong(i) ? 4000 : SHORT,
        stream: true,
        logit_bias: SMOLLM2_NO_END,
      });
      assert.equal(response.status, 200);
      let counted = false;
      const events = await readSseTimed(response, (event) => {
        if (!counted && event.data !== "[DONE]" && JSON.parse(event.data).choices?.[0]?.delta?.content) {
          counted = true;
          firstContent++;
        }
      });
      const chunks = events.filter((e) => e.data !== "[DONE]").map((e) => JSON.parse(e.data));
      return { id: chunks.find((c) => c.id)?.id ?? "", events, contentChunks: chunks.filter((c) => c.choices?.[0]?.delta?.content).length };
    });
    // Every stream is generating before the signal.
    await waitFor(async () => (firstContent === 12 ? true : undefined), 240_000);
    server.process.kill("SIGTERM");

    const health = await waitFor(async () => {
      const response = await fetch(`${server.url}/health`).catch(() => undefined);
      return response?.status === 503 ? ((await response.json()) as { status: string }) : undefined;
    }, 10_000);
    assert.equal(health.status, "draining");
    const refused = await postChat(server, { model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 });
    const refusedText = await refused.text();
    assert.equal(refused.status, 503, refusedText);
    assert.equal(openAiError(refusedText)?.code, "server_shutting_down");

    const outcomes = await Promise.all(streams);
    assert.equal(await exited, 0, server.logs());
    // Item 7 after a drain that cut streams: the server left nothing other users can read.
    assert.deepEqual(notPrivate(dataDir), []);
    const withDb = serverDatabaseReader(dataDir, () => undefined);
    const rows = await withDb((db) =>
      db.query<{ request_id: string; status: string; error_code: string | null; completion_tokens: number }>(
        "SELECT request_id, status, error_code, completion_tokens FROM usage_records WHERE request_id = ANY($1::text[])",
        [outcomes.map((o) => o.id)],
      ),
    );
    outcomes.forEach((outcome, i) => {
      const data = outcome.events.map((e) => e.data);
      assert.equal(data.at(-1), "[DONE]", `stream ${i} ends with [DONE]`);
      const last = JSON.parse(data.at(-2)!);
      const row = rows.find((r) => r.request_id === outcome.id);
      assert.ok(row, `stream ${i} has a ledger row`);
      if (isLong(i)) {
        assert.equal(last.error?.code, "server_shutting_down", `stream ${i}: ${data.at(-2)}`);
        assert.ok(openAiError(JSON.stringify(last)), data.at(-2));
        assert.equal(row.status, "interrupted");
        assert.equal(row.error_code, "server_shutting_down");
        // Billed for what was delivered: each content chunk is at least one token.
        assert.ok(row.completion_tokens >= outcome.contentChunks && row.completion_tokens > 0, JSON.stringify(row));
      } else {
        assert.equal(last.choices?.[0]?.finish_reason, "length", `stream ${i}: ${data.at(-2)}`);
        assert.equal(row.status, "completed");
        assert.equal(row.completion_tokens, SHORT);
      }
    });
    // Reading the ledger opened PGlite here, which rewrote its relation caches (pg_internal.init)
    // at 0644: the reader closes the way the server does, so those are private again too.
    assert.deepEqual(notPrivate(dataDir), []);
  });
});
