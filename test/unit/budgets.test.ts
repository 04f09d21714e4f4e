import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";
import { createKey, listKeys, setKeyLimits } from "../../src/accounts/key-store.js";
import { createSpendBudgets } from "../../src/billing/budgets.js";
import { InsufficientQuota } from "../../src/errors.js";
import type { BudgetReservation } from "../../src/billing/ports.js";
import type { Database } from "../../src/storage/database.js";
import { openPostgres } from "../../src/storage/postgres.js";
import { forEachDatabase } from "../helpers/databases.js";

async function keyWithBudget(db: Database, budgetUsd: string | null): Promise<string> {
  return (await createKey(db, { account: `budget-${randomUUID().slice(0, 8)}`, budgetUsd })).id;
}

async function spentOf(db: Database, keyId: string): Promise<string> {
  const rows = await db.query<{ spent_usd: string }>("SELECT spent_usd::text AS spent_usd FROM api_keys WHERE id = $1", [keyId]);
  return rows[0]!.spent_usd;
}

async function heldOf(db: Database, keyId: string): Promise<string> {
  const rows = await db.query<{ held: string }>(
    "SELECT COALESCE(sum(amount_usd), 0)::text AS held FROM budget_reservations WHERE key_id = $1",
    [keyId],
  );
  return rows[0]!.held;
}

function isInsufficientQuota(error: unknown): boolean {
  return error instanceof InsufficientQuota && error.status === 402 && error.code === "insufficient_quota";
}

forEachDatabase("spend budgets", (suite) => {
  const { db, kind } = suite;
  const reserve = (keyId: string, amountUsd: string) => createSpendBudgets(db).reserve({ keyId, requestId: randomUUID(), amountUsd });

  test("keys without a budget are never refused, and their spend is counted all the same", async () => {
    const keyId = await keyWithBudget(db, null);
    const first = await reserve(keyId, "1000");
    const second = await reserve(keyId, "1000000");
    assert.ok(first && second);
    assert.equal(await heldOf(db, keyId), "1001000");
    await first.settle("0.25");
    await second.settle("0.5");
    assert.equal(await heldOf(db, keyId), "0");
    assert.equal(Number(await spentOf(db, keyId)), 0.75);
  });

  test("a budget set below what a key without one has already spent stops it at once", async () => {
    const keyId = await keyWithBudget(db, null);
    await (await reserve(keyId, "1"))!.settle("0.75");
    await setKeyLimits(db, keyId, { budgetUsd: "0.5" });
    await assert.rejects(reserve(keyId, "0"), isInsufficientQuota);
    assert.equal((await listKeys(db)).find((k) => k.id === keyId)?.spentUsd, "0.75");
  });

  test("reserve and settle are exact decimal arithmetic", async () => {
    const keyId = await keyWithBudget(db, "0.3");
    const first = await reserve(keyId, "0.1");
    const second = await reserve(keyId, "0.2"); // 0.1 + 0.2 is exactly 0.3 here
    assert.ok(first && second);
    assert.equal(Number(await heldOf(db, keyId)), 0.3);
    await assert.rejects(reserve(keyId, "0.000000000000000001"), isInsufficientQuota);

    await first.settle("0.000000000000000001");
    await second.settle("0.2");
    assert.equal(await heldOf(db, keyId), "0");
    assert.equal(await spentOf(db, keyId), "0.200000000000000001");
    // Exactly what is left fits; a hair more does not.
    await assert.rejects(reserve(keyId, "0.1"), isInsufficientQuota);
    const rest = await reserve(keyId, "0.099999999999999999");
    assert.ok(rest);
    await rest.settle("0.099999999999999999");
    const [info] = await listKeys(db, { account: (await listKeys(db)).find((key) => key.id === keyId)!.account });
    assert.equal(info?.spentUsd, "0.3");
    assert.equal(info?.budgetUsd, "0.3");
  });

  test("over budget is a 402 insufficient_quota that reserves nothing", async () => {
    const keyId = await keyWithBudget(db, "1");
    const error = await reserve(keyId, "1.01").catch((e: unknown) => e);
    assert.ok(isInsufficientQuota(error), String(error));
    assert.match(
      (error as Error).message,
      /budget \$1, spent \$0, \$0 held by requests in flight, and this request may cost up to \$1\.01/,
    );
    assert.equal(await heldOf(db, keyId), "0");
    assert.ok(await reserve(keyId, "1"));
  });

  test("settling less than reserved frees the rest; more than reserved charges only the reservation", async () => {
    const keyId = await keyWithBudget(db, "1");
    const held = await reserve(keyId, "0.6");
    assert.ok(held);
    await assert.rejects(reserve(keyId, "0.5"), isInsufficientQuota);
    await held.settle("0.25");
    assert.equal(Number(await spentOf(db, keyId)), 0.25);
    assert.equal(await heldOf(db, keyId), "0");
    const rest = await reserve(keyId, "0.75"); // 0.25 + 0.75 = 1
    assert.ok(rest);
    await rest.settle("5");
    assert.equal(Number(await spentOf(db, keyId)), 1);
    await assert.rejects(reserve(keyId, "0.000001"), isInsufficientQuota);
  });

  test("settle happens once, and rejects amounts that are not decimal strings", async () => {
    const keyId = await keyWithBudget(db, "10");
    const held = await reserve(keyId, "2");
    assert.ok(held);
    await assert.rejects(held.settle("1e-3"), TypeError);
    await assert.rejects(held.settle("-1"), TypeError);
    await Promise.all([held.settle("1.5"), held.settle("1.5")]);
    await held.settle("2");
    assert.equal(Number(await spentOf(db, keyId)), 1.5);
    await assert.rejects(reserve(keyId, "-1"), TypeError);
  });

  test("expired reservations stop counting", async () => {
    const keyId = await keyWithBudget(db, "0.5");
    assert.ok(await reserve(keyId, "0.5"));
    await assert.rejects(reserve(keyId, "0.1"), isInsufficientQuota);
    // As if the server holding it had crashed an hour ago.
    await db.query("UPDATE budget_reservations SET expires_at = now() - interval '1 second' WHERE key_id = $1", [keyId]);
    const next = await reserve(keyId, "0.5");
    assert.ok(next);
    // Kept a day after expiry (not counted), so a request that outlived its reservation is still charged once when it settles.
    const kept = await db.query<{ amount_usd: string }>(
      "SELECT amount_usd::text AS amount_usd FROM budget_reservations WHERE key_id = $1",
      [keyId],
    );
    assert.equal(kept.length, 2);
    await next.settle("0");
    await db.query("UPDATE budget_reservations SET expires_at = now() - interval '2 days' WHERE key_id = $1", [keyId]);
    const last = await reserve(keyId, "0.5");
    assert.ok(last);
    await last.settle("0.25");
    const rows = await db.query<{ amount_usd: string }>(
      "SELECT amount_usd::text AS amount_usd FROM budget_reservations WHERE key_id = $1",
      [keyId],
    );
    assert.deepEqual(rows, [], "the long-expired reservation is swept by the key's next settle, with the settled one");
  });

  test("reservations expire after the configured time", async () => {
    const keyId = await keyWithBudget(db, "1");
    const budgets = createSpendBudgets(db, { reservationTtlSeconds: 1 });
    assert.ok(await budgets.reserve({ keyId, requestId: randomUUID(), amountUsd: "1" }));
    const [row] = await db.query<{ seconds: string }>(
      "SELECT round(extract(epoch FROM expires_at - now()))::text AS seconds FROM budget_reservations WHERE key_id = $1",
      [keyId],
    );
    assert.ok(row && Number(row.seconds) <= 1);
    await assert.rejects(budgets.reserve({ keyId, requestId: randomUUID(), amountUsd: "1" }), isInsufficientQuota);
    await sleep(1_100);
    assert.ok(await budgets.reserve({ keyId, requestId: randomUUID(), amountUsd: "1" }));
    // Default: an hour.
    const later = await keyWithBudget(db, "1");
    await reserve(later, "0.1");
    const [hour] = await db.query<{ seconds: string }>(
      "SELECT round(extract(epoch FROM expires_at - now()))::text AS seconds FROM budget_reservations WHERE key_id = $1",
      [later],
    );
    assert.equal(hour?.seconds, "3600");
  });

  test("a lowered budget applies to the next reservation; spend is kept", async () => {
    const keyId = await keyWithBudget(db, "2");
    const held = await reserve(keyId, "1");
    await held!.settle("1");
    await setKeyLimits(db, keyId, { budgetUsd: "1" });
    await assert.rejects(reserve(keyId, "0.01"), isInsufficientQuota);
    await setKeyLimits(db, keyId, { budgetUsd: null });
    assert.ok(await reserve(keyId, "100"));
  });

  test("50 concurrent reservations of 0.01 against a 0.2 budget: exactly 20 admitted, never an overshoot", async () => {
    // On PostgreSQL, a pool of many connections, so the reservations really do run at once.
    const racer = kind === "postgres" ? await openPostgres(suite.database.url!, { maxConnections: 25 }) : db;
    try {
      const budgets = createSpendBudgets(racer);
      const keyId = await keyWithBudget(db, "0.2");
      const outcomes = await Promise.allSettled(
        Array.from({ length: 50 }, () => budgets.reserve({ keyId, requestId: randomUUID(), amountUsd: "0.01" })),
      );
      const admitted = outcomes.filter((o): o is PromiseFulfilledResult<BudgetReservation | null> => o.status === "fulfilled");
      const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
      assert.equal(admitted.length, 20);
      assert.equal(refused.length, 30);
      for (const r of refused) assert.ok(isInsufficientQuota(r.reason), String(r.reason));
      assert.equal(Number(await heldOf(db, keyId)), 0.2);

      // Settling all of them, concurrently, lands on exactly the budget.
      await Promise.all(admitted.map((o) => o.value!.settle("0.01")));
      assert.equal(await spentOf(db, keyId), "0.20");
      assert.equal(await heldOf(db, keyId), "0");
      await assert.rejects(budgets.reserve({ keyId, requestId: randomUUID(), amountUsd: "0.01" }), isInsufficientQuota);
    } finally {
      if (racer !== db) await racer.close();
    }
  });

  test("settles racing new reservations never overshoot either", async () => {
    const racer = kind === "postgres" ? await openPostgres(suite.database.url!, { maxConnections: 25 }) : db;
    try {
      const budgets = createSpendBudgets(racer);
      const keyId = await keyWithBudget(db, "1");
      // Ten reservations of 0.1 fill the budget; each settles at 0.05 while 40 more try to reserve 0.05.
      const first = await Promise.all(
        Array.from({ length: 10 }, () => budgets.reserve({ keyId, requestId: randomUUID(), amountUsd: "0.1" })),
      );
      const outcomes = await Promise.allSettled([
        ...first.map((r) => r!.settle("0.05").then(() => "settled")),
        ...Array.from({ length: 40 }, () => budgets.reserve({ keyId, requestId: randomUUID(), amountUsd: "0.05" })),
      ]);
      // How many fit depends on how many settles ran first; the sum never passes the budget.
      const reserved = outcomes.slice(10).filter((o) => o.status === "fulfilled").length;
      assert.ok(reserved <= 10, `${reserved} reserved`);
      assert.equal(await spentOf(db, keyId), "0.50");
      assert.equal(Number(await heldOf(db, keyId)), reserved * 0.05);
      // With every settle done, exactly the rest of the budget is still there to reserve.
      const more = await Promise.allSettled(
        Array.from({ length: 20 }, () => budgets.reserve({ keyId, requestId: randomUUID(), amountUsd: "0.05" })),
      );
      assert.equal(more.filter((o) => o.status === "fulfilled").length, 10 - reserved);
    } finally {
      if (racer !== db) await racer.close();
    }
  });
});
