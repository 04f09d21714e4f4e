import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { createKey, findAccount } from "../../src/accounts/key-store.js";
import { createSpendBudgets } from "../../src/billing/budgets.js";
import { coalesced } from "../../src/billing/coalesced.js";
import { createUsageLedger } from "../../src/billing/ledger.js";
import { forEachDatabase } from "../helpers/databases.js";
import { usage } from "../helpers/usage.js";

test("writes that arrive while one is under way go together in the next; a write alone goes on the loop's next turn", async () => {
  const batches: number[][] = [];
  let release: () => void = () => {};
  const write = coalesced(async (items: number[]) => {
    batches.push(items);
    if (items[0] === 0) await new Promise<void>((resolve) => (release = resolve));
    return items.map((i) => i * 10);
  });
  const first = write(0);
  assert.deepEqual(batches, [], "the caller's own turn finishes first (a request's launch goes before its row)");
  await new Promise(setImmediate);
  assert.deepEqual(batches, [[0]], "the first write started on the next turn, without waiting for company");
  const rest = [1, 2, 3].map((item) => write(item));
  release();
  assert.deepEqual(await Promise.all([first, ...rest]), [0, 10, 20, 30]);
  assert.deepEqual(batches, [[0], [1, 2, 3]]);
});

test("a write made as the previous one resolves is written (no loop left waiting); idle() waits for every queued write", async () => {
  const written: number[] = [];
  const write = coalesced(async (items: number[]) => {
    await new Promise((resolve) => setTimeout(resolve, 2));
    written.push(...items);
    return items;
  });
  // Each write is made in the continuation of the one before, as a loop of awaited calls makes them.
  for (const item of [1, 2, 3]) assert.equal(await write(item), item);
  const late = [4, 5].map((item) => write(item));
  await write.idle();
  assert.deepEqual(written, [1, 2, 3, 4, 5], "idle() resolved only once the queued writes were done");
  await Promise.all(late);

  // Writes queued after idle() was called do not hold it: the loop may stay busy for ever under load.
  let releaseLater!: () => void;
  const later = new Promise<void>((resolve) => (releaseLater = resolve));
  const busy = coalesced(async (items: number[]) => {
    if (items.includes(7)) await later;
    return items;
  });
  const six = busy(6);
  await new Promise(setImmediate); // six's write under way, alone
  const idle = busy.idle();
  const seven = busy(7);
  await idle;
  assert.equal(await six, 6);
  releaseLater();
  assert.equal(await seven, 7);
});

test("a write beside a launch waits afterMs (later ones join it); a write that may not wait starts the batch at once", async () => {
  const batches: number[][] = [];
  const write = coalesced(async (items: number[]) => {
    batches.push(items);
    return items;
  });
  const beside = [write(1, { afterMs: 30 }), write(2, { afterMs: 30 })];
  await new Promise(setImmediate);
  await new Promise(setImmediate);
  assert.deepEqual(batches, [], "nothing written on the next turns: the launch goes first");
  assert.deepEqual(await Promise.all(beside), [1, 2]);
  assert.deepEqual(batches, [[1, 2]], "written together once the wait was over");

  const waiting = write(3, { afterMs: 60_000 });
  const hurried = write(4);
  await new Promise(setImmediate);
  assert.deepEqual(batches.at(-1), [3, 4], "a write that may not wait took the waiting one with it on the next turn");
  assert.deepEqual(await Promise.all([waiting, hurried]), [3, 4]);
  await write.idle();
});

test("a failed batch is written again item by item: only the bad item fails", async () => {
  const write = coalesced(async (items: number[]) => {
    if (items.includes(2)) throw new Error(`bad item among ${items.length}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
    return items;
  });
  const results = await Promise.allSettled([write(0), write(1), write(2), write(3)]);
  assert.deepEqual(
    results.map((r) => r.status),
    ["fulfilled", "fulfilled", "rejected", "fulfilled"],
  );
  assert.match(String((results[2] as PromiseRejectedResult).reason), /bad item among 1/);
});

forEachDatabase("the ledger's final rows, written together", ({ db }) => {
  test("rows ending together share a statement; each charges its own key's reservation once; a bad row fails alone", async () => {
    const name = `coalesced-${randomUUID().slice(0, 8)}`;
    const keys = [await createKey(db, { account: name }), await createKey(db, { account: name })];
    const accountId = (await findAccount(db, name))!.id;
    const budgets = createSpendBudgets(db);
    const ledger = createUsageLedger(db);
    const rows = keys.flatMap((key) => [usage(accountId, key.id, { costUsd: "0.25" }), usage(accountId, key.id, { costUsd: "0.5" })]);
    for (const row of rows) await budgets.reserve({ keyId: row.keyId, requestId: row.requestId, amountUsd: "1" });
    const bad = usage(accountId, "no-such-key", { costUsd: "0.1" });

    const written = await Promise.allSettled([...rows, bad].map((row) => ledger.record(row)));
    assert.deepEqual(
      written.map((r) => r.status),
      ["fulfilled", "fulfilled", "fulfilled", "fulfilled", "rejected"],
    );
    const spent = await db.query<{ id: string; spent: string }>(
      "SELECT id, spent_usd::text AS spent FROM api_keys WHERE id = ANY($1::text[]) ORDER BY id",
      [keys.map((k) => k.id)],
    );
    assert.deepEqual(
      spent.map((k) => Number(k.spent)),
      [0.75, 0.75],
    );
    const held = await db.query("SELECT 1 FROM budget_reservations WHERE key_id = ANY($1::text[])", [keys.map((k) => k.id)]);
    assert.equal(held.length, 0);
    const stored = await db.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM usage_records WHERE request_id = ANY($1::text[]) AND status = 'completed'",
      [rows.map((r) => r.requestId)],
    );
    assert.equal(stored[0]!.n, "4");
  });
});
