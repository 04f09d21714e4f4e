import assert from "node:assert/strict";
import { test } from "node:test";
import { createKey } from "../../src/accounts/key-store.js";
import { BatchRunner, type LineRequest } from "../../src/batches/runner.js";
import { insertBatch, insertLines, startBatch, getBatch } from "../../src/batches/batch-store.js";
import { BATCH_ENDPOINTS } from "../../src/api/registry.js";
import { validateBatchFile } from "../../src/batches/validate.js";
import { createFileStore } from "../../src/storage/files.js";
import type { Database } from "../../src/storage/database.js";
import { forEachDatabase } from "../helpers/databases.js";
import { waitFor } from "../helpers/server.js";

const CHAT_LINES = BATCH_ENDPOINTS.find((e) => e.url === "/v1/chat/completions")!;

// The runner's own decisions, with the request path played by a recorder (the real path is covered
// end to end in test/integration/batches*.test.ts): who goes next when capacity frees up.
async function batchOf(db: Database, account: string, keyId: string, accountId: string, lines: number): Promise<string> {
  const text = Array.from({ length: lines }, (_, i) =>
    JSON.stringify({
      custom_id: `${account}-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "m", messages: [{ role: "user", content: "hi" }] },
    }),
  ).join("\n");
  const validation = validateBatchFile(Buffer.from(text), CHAT_LINES, 100);
  assert.ok(validation.ok);
  const batch = await insertBatch(
    db,
    {
      accountId,
      keyId,
      endpoint: "/v1/chat/completions",
      inputFileId: "file-x",
      completionWindow: "24h",
      windowSeconds: 3600,
      metadata: null,
    },
    "owner-1",
  );
  await insertLines(db, batch.id, validation.lines);
  await db.transaction((tx) =>
    startBatch(
      tx,
      batch.id,
      validation.lines.length,
      validation.lines.reduce((sum, l) => sum + l.estimatedTokens, 0),
    ),
  );
  return batch.id;
}

forEachDatabase("the batch runner", ({ db }) => {
  test("one line at a time: accounts take turns, then each account's batches; every batch completes with its output file", async () => {
    const a = await createKey(db, { account: "runner-a" });
    const b = await createKey(db, { account: "runner-b" });
    const [accountA] = await db.query<{ id: string }>("SELECT account_id AS id FROM api_keys WHERE id = $1", [a.id]);
    const [accountB] = await db.query<{ id: string }>("SELECT account_id AS id FROM api_keys WHERE id = $1", [b.id]);
    const a1 = await batchOf(db, "a1", a.id, accountA!.id, 4);
    const a2 = await batchOf(db, "a2", a.id, accountA!.id, 4);
    const b1 = await batchOf(db, "b1", b.id, accountB!.id, 8);
    const started: LineRequest[] = [];
    const files = createFileStore(db);
    const runner = new BatchRunner({
      db,
      files,
      execute: async (line) => {
        started.push(line);
        await new Promise((resolve) => setTimeout(resolve, 5));
        return {
          statusCode: 200,
          body: JSON.stringify({ id: `chatcmpl-${started.length}`, object: "chat.completion" }),
          requestId: null,
          code: null,
        };
      },
      capacity: () => 1,
      ownerId: "owner-1",
      ownerIsGone: async () => true,
      log: () => {},
      pollMs: 20,
    });
    runner.start();
    try {
      for (const id of [a1, a2, b1])
        await waitFor(
          async () => ((await getBatch(db, id === b1 ? accountB!.id : accountA!.id, id))?.status === "completed" ? true : undefined),
          30_000,
        );
    } finally {
      await runner.stop();
    }
    assert.equal(started.length, 16, "each line ran once");
    const accounts = started.slice(0, 8).map((l) => l.keyId);
    assert.deepEqual(accounts, [a.id, b.id, a.id, b.id, a.id, b.id, a.id, b.id], "accounts alternate while both have lines");
    const batchesOfA = started
      .filter((l) => l.keyId === a.id)
      .slice(0, 4)
      .map((l) => l.batchId);
    assert.equal(new Set(batchesOfA).size, 2, "account A's two batches share its turns");
    const batch = await getBatch(db, accountB!.id, b1);
    assert.deepEqual([batch!.total, batch!.completed, batch!.failed], [8, 8, 0]);
    const output = (await files.content(accountB!.id, batch!.output_file_id!))!.toString("utf8").trim().split("\n");
    assert.deepEqual(
      output.map((line) => (JSON.parse(line) as { custom_id: string }).custom_id),
      Array.from({ length: 8 }, (_, i) => `b1-${i}`),
    );
  });

  test("a batch this process is still validating is left to it; one a stopped server was validating fails as interrupted", async () => {
    const key = await createKey(db, { account: "runner-validating" });
    const [account] = await db.query<{ id: string }>("SELECT account_id AS id FROM api_keys WHERE id = $1", [key.id]);
    const draft = {
      accountId: account!.id,
      keyId: key.id,
      endpoint: "/v1/chat/completions",
      inputFileId: "file-x",
      completionWindow: "24h",
      windowSeconds: 3600,
      metadata: null,
    };
    const mine = await insertBatch(db, draft, "owner-2");
    const orphan = await insertBatch(db, draft, "owner-gone");
    const runner = new BatchRunner({
      db,
      files: createFileStore(db),
      execute: async () => ({ statusCode: 200, body: "{}", requestId: null, code: null }),
      capacity: () => 1,
      ownerId: "owner-2",
      ownerIsGone: async (_tx, owner) => owner === "owner-gone",
      log: () => {},
      pollMs: 20,
      refreshMs: 0,
    });
    runner.start();
    try {
      const failed = await waitFor(async () => {
        const batch = await getBatch(db, account!.id, orphan.id);
        return batch?.status === "failed" ? batch : undefined;
      }, 30_000);
      assert.equal((JSON.parse(failed.errors!) as { code: string }[])[0]!.code, "validation_interrupted");
      // Several refreshes later, the batch being validated here is untouched.
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal((await getBatch(db, account!.id, mine.id))!.status, "validating");
    } finally {
      await runner.stop();
    }
  });

  test("once the output can no longer be stored, the lines still running are stopped, not run again, and unbilled", async () => {
    const key = await createKey(db, { account: "runner-quota" });
    const [account] = await db.query<{ id: string }>("SELECT account_id AS id FROM api_keys WHERE id = $1", [key.id]);
    const id = await batchOf(db, "q", key.id, account!.id, 3);
    const started: LineRequest[] = [];
    /** For each line that ran long: whether it was told to stop (true) or ran its course (false). */
    const stopped: boolean[] = [];
    const allStarted = waitFor(async () => (started.length === 3 ? true : undefined), 30_000);
    const runner = new BatchRunner({
      db,
      files: createFileStore(db),
      execute: async (line) => {
        started.push(line);
        // The first line's answer is over the quota once all three run; the other two compute for long (an embedding line of 2,048 inputs).
        if (started.length === 1) {
          await allStarted;
          return { statusCode: 200, body: JSON.stringify({ data: "x".repeat(500) }), requestId: null, code: null };
        }
        const told = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), 10_000);
          const stop = () => {
            clearTimeout(timer);
            resolve(true);
          };
          line.signal?.addEventListener("abort", stop, { once: true });
        });
        stopped.push(told);
        return { statusCode: 500, body: JSON.stringify({ error: { message: "aborted" } }), requestId: null, code: "internal_error" };
      },
      capacity: () => 3,
      fileBytesPerAccount: 100,
      ownerId: "owner-3",
      ownerIsGone: async () => true,
      log: () => {},
      pollMs: 20,
    });
    runner.start();
    try {
      const batch = await waitFor(async () => {
        const row = await getBatch(db, account!.id, id);
        return row?.status === "completed" ? row : undefined;
      }, 30_000);
      assert.deepEqual(stopped, [true, true], "the running lines were stopped");
      assert.equal(started.length, 3, "no line ran again");
      assert.deepEqual([batch.total, batch.completed, batch.failed], [3, 0, 3]);
    } finally {
      await runner.stop();
    }
  });
});
