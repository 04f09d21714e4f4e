import assert from "node:assert/strict";
import { test } from "node:test";
import { createAccount } from "../../src/accounts/key-store.js";
import { createCompletionStore, type StoredCompletion } from "../../src/api/chat/completion-store.js";
import { createResponseStore } from "../../src/api/responses/response-store.js";
import { forEachDatabase } from "../helpers/databases.js";

const completion = (id: string, model: string, metadata: Record<string, string> = {}): StoredCompletion => ({
  id,
  model,
  metadata,
  messages: [{ role: "user", content: `question ${id}` }],
  body: `{"id":"${id}","object":"chat.completion","usage":{"estimated_cost":0.000000123456789012345}}`,
});

const KEEP = { perAccount: 1000, retentionDays: 30 };

forEachDatabase("stored chat completions", ({ db }) => {
  test("save, list by model and metadata in both orders with after, update, delete; each account sees only its own", async () => {
    const store = createCompletionStore(db, KEEP);
    const [mine, theirs] = [await createAccount(db, "mine"), await createAccount(db, "theirs")];
    for (let i = 0; i < 5; i++) await store.save(mine.id, completion(`c${i}`, i % 2 === 0 ? "even" : "odd", { n: String(i), team: "a" }));
    await store.save(theirs.id, completion("t0", "even", { team: "a" }));

    const got = await store.get(mine.id, "c1");
    assert.equal(got?.body, completion("c1", "odd").body, "the body is kept as text, its decimals exact");
    assert.deepEqual(got?.messages, [{ role: "user", content: "question c1" }]);
    assert.equal(await store.get(theirs.id, "c1"), null, "another account's id reads as absent");

    const ids = (rows: StoredCompletion[] | null) => rows?.map((r) => r.id);
    assert.deepEqual(ids(await store.list(mine.id, { metadata: {}, limit: 10, order: "asc" })), ["c0", "c1", "c2", "c3", "c4"]);
    assert.deepEqual(
      ids(await store.list(mine.id, { metadata: {}, limit: 2, order: "desc", after: "c3" })),
      ["c2", "c1", "c0"],
      "limit + 1 rows: one more says has_more",
    );
    assert.deepEqual(ids(await store.list(mine.id, { model: "even", metadata: { team: "a" }, limit: 10, order: "asc", after: "c0" })), [
      "c2",
      "c4",
    ]);
    assert.deepEqual(ids(await store.list(mine.id, { metadata: { n: "3" }, limit: 10, order: "asc" })), ["c3"]);
    assert.equal(
      await store.list(mine.id, { metadata: {}, limit: 10, order: "asc", after: "t0" }),
      null,
      "a cursor in another account is no cursor",
    );

    assert.deepEqual((await store.setMetadata(mine.id, "c2", { reviewed: "yes" }))?.metadata, { reviewed: "yes" });
    assert.equal(await store.setMetadata(theirs.id, "c2", { x: "y" }), null);
    assert.equal(await store.delete(theirs.id, "c2"), false);
    assert.equal(await store.delete(mine.id, "c2"), true);
    assert.equal(await store.get(mine.id, "c2"), null);
    assert.deepEqual(ids(await store.list(theirs.id, { metadata: {}, limit: 10, order: "asc" })), ["t0"]);
  });

  test("each account keeps its newest completions up to its cap; past the retention period they read as absent and go", async () => {
    const store = createCompletionStore(db, { perAccount: 3, retentionDays: 30 });
    const [busy, quiet] = [await createAccount(db, "busy"), await createAccount(db, "quiet")];
    await store.save(quiet.id, completion("q0", "m"));
    for (let i = 0; i < 5; i++) await store.save(busy.id, completion(`b${i}`, "m"));
    const ids = async (account: string) => (await store.list(account, { metadata: {}, limit: 10, order: "asc" }))?.map((r) => r.id);
    assert.deepEqual(await ids(busy.id), ["b2", "b3", "b4"], "the two oldest went");
    assert.equal(await store.get(busy.id, "b0"), null);
    assert.deepEqual(await ids(quiet.id), ["q0"], "another account's cap is its own");

    await db.query("UPDATE chat_completions SET created_at = now() - interval '31 days' WHERE id = 'b2'");
    assert.equal(await store.get(busy.id, "b2"), null, "expired: absent at once");
    assert.equal(await store.setMetadata(busy.id, "b2", { x: "y" }), null);
    assert.deepEqual(await ids(busy.id), ["b3", "b4"]);
    await store.save(busy.id, completion("b5", "m"));
    const [{ n }] = (await db.query<{ n: string }>("SELECT count(*) AS n FROM chat_completions WHERE account_id = $1", [busy.id])) as [
      { n: string },
    ];
    assert.equal(Number(n), 3, "the expired row is gone from the table after the next save");
  });
});

forEachDatabase("stored responses", ({ db }) => {
  test("each account keeps its newest responses up to its cap, within the retention period", async () => {
    const store = createResponseStore(db, { perAccount: 2, retentionDays: 7 });
    const account = await createAccount(db, "responder");
    const saved = (id: string) =>
      store.save(account.id, id, { conversation: [{ role: "user", content: id }], body: `{"id":"${id}"}`, inputItems: [] });
    for (const id of ["resp_1", "resp_2"]) await saved(id);
    await db.query("UPDATE responses SET created_at = created_at - interval '1 second' WHERE id = 'resp_1'");
    await saved("resp_3");
    assert.equal(await store.get(account.id, "resp_1"), null, "past the cap the oldest goes");
    assert.equal((await store.get(account.id, "resp_2"))?.body, '{"id":"resp_2"}');
    await db.query("UPDATE responses SET created_at = now() - interval '8 days' WHERE id = 'resp_2'");
    assert.equal(await store.get(account.id, "resp_2"), null, "past the retention period it reads as absent");
    assert.equal((await store.get(account.id, "resp_3"))?.body, '{"id":"resp_3"}');
  });
});
