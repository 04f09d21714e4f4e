import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { createKey } from "../../src/accounts/key-store.js";
import { createSpendBudgets } from "../../src/billing/budgets.js";
import { requestCost } from "../../src/billing/cost.js";
import { createInFlightLedger } from "../../src/billing/in-flight.js";
import { createUsageLedger } from "../../src/billing/ledger.js";
import { reconcileDeadOwners } from "../../src/billing/recovery.js";
import { newOwner, registerOwner } from "../../src/processes/owners.js";
import { holdAdvisoryLock } from "../../src/storage/postgres.js";
import type { Database } from "../../src/storage/database.js";
import { forEachDatabase } from "../helpers/databases.js";

const PRICES = { input: "0.5", output: "1.5", cached_input: "0.25" };

async function keyWithBudget(db: Database): Promise<{ keyId: string; accountId: string }> {
  const created = await createKey(db, { account: `inflight-${randomUUID().slice(0, 8)}`, budgetUsd: "100" });
  const [row] = await db.query<{ account_id: string }>("SELECT account_id FROM api_keys WHERE id = $1", [created.id]);
  return { keyId: created.id, accountId: row!.account_id };
}

const rowOf = async (db: Database, requestId: string) =>
  (
    await db.query<{ status: string; completion_tokens: number; cached_tokens: number; cost: string }>(
      "SELECT status, completion_tokens, cached_tokens, cost_usd::text AS cost FROM usage_records WHERE request_id = $1",
      [requestId],
    )
  )[0]!;

forEachDatabase("in-flight rows and crash reconciliation", (suite) => {
  const { db } = suite;

  /** An admitted request of `owner` with a reservation of `reserved`, as the chat service makes it. */
  async function admitted(ownerId: string, key: { keyId: string; accountId: string }, maxCompletionTokens = 100) {
    const requestId = `chatcmpl-${randomUUID()}`;
    const ledger = createInFlightLedger(db, ownerId, { stepTokens: 8 });
    const { guard } = await ledger.begin({
      requestId,
      accountId: key.accountId,
      keyId: key.keyId,
      model: "m/test",
      serviceTier: "default",
      promptTokens: 10,
      prices: PRICES,
      maxCompletionTokens,
    });
    const reservation = await createSpendBudgets(db).reserve({ keyId: key.keyId, requestId, amountUsd: "1" });
    return { requestId, guard, ledger, reservation: reservation! };
  }

  test("the row is in_flight from admission, and its token count stays at or ahead of delivery, capped at max", async () => {
    const owner = newOwner();
    await registerOwner(db, owner);
    const { requestId, guard } = await admitted(owner.id, await keyWithBudget(db), 12);
    assert.equal((await rowOf(db, requestId)).status, "in_flight");
    assert.equal((await rowOf(db, requestId)).completion_tokens, 8, "the row covers the first step from admission");
    assert.equal(guard.cover(1, 4), undefined, "so the first token waits for no write");
    assert.equal(guard.cover(8, 4), undefined, "covered tokens do not wait");
    await guard.cover(10, 4);
    assert.equal((await rowOf(db, requestId)).completion_tokens, 12, "written ahead, never beyond max_tokens");
    assert.equal((await rowOf(db, requestId)).cached_tokens, 4);
  });

  test("a dead owner's rows are billed for what they covered, marked interrupted, their reservations released; once only", async () => {
    const self = newOwner();
    const dead = newOwner();
    await registerOwner(db, self);
    await registerOwner(db, dead);
    const key = await keyWithBudget(db);
    const { requestId, guard, ledger, reservation } = await admitted(dead.id, key);
    await guard.cover(5, 0);
    await ledger.drain();
    const covered = (await rowOf(db, requestId)).completion_tokens;

    const result = await reconcileDeadOwners(db, self);
    assert.ok(result.rows >= 1);
    const row = await rowOf(db, requestId);
    assert.equal(row.status, "interrupted");
    const cost = requestCost(PRICES, { promptTokens: 10, cachedPromptTokens: 0, completionTokens: covered });
    assert.equal(Number(row.cost), Number(cost));
    const [keyRow] = await db.query<{ spent: string; held: string }>(
      "SELECT spent_usd::text AS spent, (SELECT count(*)::text FROM budget_reservations WHERE key_id = $1) AS held FROM api_keys WHERE id = $1",
      [key.keyId],
    );
    assert.equal(Number(keyRow!.spent), Number(cost));
    assert.equal(keyRow!.held, "0");

    // The dead process's own late settle and final write (had it lived on) change nothing.
    await reservation.settle("0.9");
    await createUsageLedger(db).record({
      requestId,
      accountId: key.accountId,
      keyId: key.keyId,
      model: "m/test",
      serviceTier: "default",
      promptTokens: 10,
      cachedTokens: 0,
      completionTokens: 50,
      costUsd: "0.9",
      status: "completed",
      finishReason: "stop",
      errorCode: null,
      queueMs: 0,
      ttftMs: 0,
      durationMs: 1,
    });
    assert.equal((await rowOf(db, requestId)).status, "interrupted");
    const [again] = await db.query<{ spent: string }>("SELECT spent_usd::text AS spent FROM api_keys WHERE id = $1", [key.keyId]);
    assert.equal(Number(again!.spent), Number(cost), "charged once");
  });

  test("a key without a budget reserves in the row's own write; a key with one is left to the budget check", async () => {
    const owner = newOwner();
    await registerOwner(db, owner);
    const unbudgeted = await createKey(db, { account: `inflight-${randomUUID().slice(0, 8)}` });
    const budgeted = await keyWithBudget(db);
    const [account] = await db.query<{ account_id: string }>("SELECT account_id FROM api_keys WHERE id = $1", [unbudgeted.id]);
    const ledger = createInFlightLedger(db, owner.id);
    const begin = (keyId: string, accountId: string) => {
      const requestId = `chatcmpl-${randomUUID()}`;
      return ledger
        .begin({
          requestId,
          accountId,
          keyId,
          model: "m/test",
          serviceTier: "default",
          promptTokens: 10,
          prices: PRICES,
          maxCompletionTokens: 4,
          reserveUsd: "0.125",
        })
        .then((begun) => ({ requestId, ...begun }));
    };
    const held = async (requestId: string) =>
      (
        await db.query<{ amount: string }>("SELECT amount_usd::text AS amount FROM budget_reservations WHERE request_id = $1", [requestId])
      ).map((r) => Number(r.amount));

    const free = await begin(unbudgeted.id, account!.account_id);
    assert.equal(free.reserved, true);
    assert.deepEqual(await held(free.requestId), [0.125]);
    assert.equal((await rowOf(db, free.requestId)).status, "in_flight");

    const checked = await begin(budgeted.keyId, budgeted.accountId);
    assert.equal(checked.reserved, false, "a budget is checked under the key's row lock, not here");
    assert.deepEqual(await held(checked.requestId), []);
    assert.equal((await rowOf(db, checked.requestId)).status, "in_flight", "the row is written all the same");
  });

  test("the request's final row charges its reservation in the same write, at most what was reserved, once", async () => {
    const owner = newOwner();
    await registerOwner(db, owner);
    const key = await keyWithBudget(db);
    const spentAndHeld = async () =>
      (
        await db.query<{ spent: string; held: string }>(
          "SELECT spent_usd::text AS spent, (SELECT count(*)::text FROM budget_reservations WHERE key_id = $1) AS held FROM api_keys WHERE id = $1",
          [key.keyId],
        )
      )[0]!;
    const final = (requestId: string, costUsd: string) =>
      createUsageLedger(db).record({
        requestId,
        accountId: key.accountId,
        keyId: key.keyId,
        model: "m/test",
        serviceTier: "default",
        promptTokens: 10,
        cachedTokens: 0,
        completionTokens: 5,
        costUsd,
        status: "completed",
        finishReason: "stop",
        errorCode: null,
        queueMs: 0,
        ttftMs: 0,
        durationMs: 1,
      });

    const first = await admitted(owner.id, key);
    assert.equal((await spentAndHeld()).held, "1");
    await final(first.requestId, "0.25");
    await final(first.requestId, "0.25");
    assert.deepEqual(
      { ...(await spentAndHeld()), spent: Number((await spentAndHeld()).spent) },
      { spent: 0.25, held: "0" },
      "charged once, reservation gone",
    );
    assert.equal((await rowOf(db, first.requestId)).status, "completed");

    // A cost above the reservation (1) is charged only up to it: the reservation is what kept concurrent requests within the budget.
    const second = await admitted(owner.id, key);
    await final(second.requestId, "3");
    assert.equal(Number((await spentAndHeld()).spent), 1.25);
  });

  test("a live owner's rows are left alone (PostgreSQL: its advisory lock is held)", async (t) => {
    if (suite.kind !== "postgres") return t.skip("PGlite has one process per data dir: every other owner is dead");
    const self = newOwner();
    const live = newOwner();
    const lock = await holdAdvisoryLock(suite.database.url!, live.lockKey);
    try {
      await registerOwner(db, self);
      await registerOwner(db, live);
      const { requestId } = await admitted(live.id, await keyWithBudget(db));
      await reconcileDeadOwners(db, self);
      assert.equal((await rowOf(db, requestId)).status, "in_flight");
    } finally {
      await lock.release();
    }
    const released = newOwner();
    await registerOwner(db, released);
    const result = await reconcileDeadOwners(db, released);
    assert.ok(result.owners >= 1, "once its lock is gone, the owner is dead");
  });
});
