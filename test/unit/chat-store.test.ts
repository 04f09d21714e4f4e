import assert from "node:assert/strict";
import { test } from "node:test";
import { createAccount } from "../../src/accounts/store.js";
import { createCompletionStore, type StoredCompletion } from "../../src/chat-store/store.js";
import { forEachDatabase } from "../helpers/databases.js";

const completion = (id: string, model: string, metadata: Record<string, string> = {}): StoredCompletion => ({
  id,
  model,
  metadata,
  messages: [{ role: "user", content: `question ${id}` }],
  body: `{"id":"${id}","object":"chat.completion","usage":{"estimated_cost":0.000000123456789012345}}`,
});

forEachDatabase("stored chat completions", ({ db }) => {
  test("save, list by model and metadata in both orders with after, update, delete; each account sees only its own", async () => {
    const store = createCompletionStore(db);
    const [mine, theirs] = [await createAccount(db, "mine"), await createAccount(db, "theirs")];
    for (let i = 0; i < 5; i++) await store.save(mine.id, completion(`c${i}`, i % 2 === 0 ? "even" : "odd", { n: String(i), team: "a" }));
    await store.save(theirs.id, completion("t0", "even", { team: "a" }));

    const got = await store.get(mine.id, "c1");
    assert.equal(got?.body, completion("c1", "odd").body, "the body is kept as text, its decimals exact");
    assert.deepEqual(got?.messages, [{ role: "user", content: "question c1" }]);
    assert.equal(await store.get(theirs.id, "c1"), null, "another account's id reads as absent");

    const ids = (rows: StoredCompletion[] | null) => rows?.map((r) => r.id);
    assert.deepEqual(ids(await store.list(mine.id, { metadata: {}, limit: 10, order: "asc" })), ["c0", "c1", "c2", "c3", "c4"]);
    assert.deepEqual(ids(await store.list(mine.id, { metadata: {}, limit: 2, order: "desc", after: "c3" })), ["c2", "c1", "c0"], "limit + 1 rows: one more says has_more");
    assert.deepEqual(ids(await store.list(mine.id, { model: "even", metadata: { team: "a" }, limit: 10, order: "asc", after: "c0" })), ["c2", "c4"]);
    assert.deepEqual(ids(await store.list(mine.id, { metadata: { n: "3" }, limit: 10, order: "asc" })), ["c3"]);
    assert.equal(await store.list(mine.id, { metadata: {}, limit: 10, order: "asc", after: "t0" }), null, "a cursor in another account is no cursor");

    assert.deepEqual((await store.setMetadata(mine.id, "c2", { reviewed: "yes" }))?.metadata, { reviewed: "yes" });
    assert.equal(await store.setMetadata(theirs.id, "c2", { x: "y" }), null);
    assert.equal(await store.delete(theirs.id, "c2"), false);
    assert.equal(await store.delete(mine.id, "c2"), true);
    assert.equal(await store.get(mine.id, "c2"), null);
    assert.deepEqual(ids(await store.list(theirs.id, { metadata: {}, limit: 10, order: "asc" })), ["t0"]);
  });
});
