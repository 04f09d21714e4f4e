import assert from "node:assert/strict";
import { test } from "node:test";
import { findOrCreateAccount } from "../../src/accounts/key-store.js";
import { queryInstanceUsage } from "../../src/billing/instance-usage.js";
import { instanceTimeCost, millisecondsToSeconds, segmentsToBill } from "../../src/billing/instance-time.js";
import { billInstance, closeDeadIntervals, createInstanceMeter, newInstanceId } from "../../src/deployments/metering.js";
import { resolveSettings } from "../../src/deployments/settings.js";
import {
  findDeployment,
  insertDeployment as insertWithLimits,
  listDeployments,
  markDeleting,
} from "../../src/deployments/deployment-store.js";
import { DEFAULT_DEPLOYMENT_LIMITS } from "../../src/deployments/types.js";
import type { Database } from "../../src/storage/database.js";
import { forEachDatabase } from "../helpers/databases.js";

test("instance time cost: seconds × hourly ÷ 3600, exact, half-up at 12 places", () => {
  assert.equal(instanceTimeCost("3600", "0.36"), "0.36");
  assert.equal(instanceTimeCost("1.001", "0.36"), "0.0001001");
  assert.equal(instanceTimeCost("0", "0.36"), "0");
  // 1 s at $1/h = 1/3600 = 0.000277777…: 12 places, the last rounded half-up.
  assert.equal(instanceTimeCost("1", "1"), "0.000277777778");
  assert.equal(instanceTimeCost("2", "0.0000000009"), "0.000000000001"); // 5e-13 rounds up
  assert.throws(() => instanceTimeCost("-1", "1"), TypeError);
  assert.throws(() => instanceTimeCost("1", "1e-3"), TypeError);
});

test("milliseconds become exact decimal seconds", () => {
  assert.equal(millisecondsToSeconds(1500), "1.5");
  assert.equal(millisecondsToSeconds(1), "0.001");
  assert.equal(millisecondsToSeconds(7_200_000), "7200");
  assert.throws(() => millisecondsToSeconds(1.5), RangeError);
});

test("segments: whole ones as time passes, the rest when the instance stops, never past the end", () => {
  assert.deepEqual(segmentsToBill(0, 2500, 1000, false), [
    { startMs: 0, endMs: 1000 },
    { startMs: 1000, endMs: 2000 },
  ]);
  assert.deepEqual(segmentsToBill(0, 2500, 1000, true).at(-1), { startMs: 2000, endMs: 2500 });
  assert.deepEqual(segmentsToBill(2000, 2000, 1000, true), []);
  assert.deepEqual(segmentsToBill(0, 999, 1000, false), []);
});

const LIMITS = DEFAULT_DEPLOYMENT_LIMITS;

test("settings: defaults, bounds and min ≤ max checked in one place", () => {
  assert.deepEqual(resolveSettings(undefined, {}, LIMITS), { minInstances: 1, maxInstances: 1, maxBatchSize: 4, contextLength: null });
  assert.deepEqual(resolveSettings(undefined, { minInstances: 2, contextLength: 1024 }, LIMITS), {
    minInstances: 2,
    maxInstances: 2,
    maxBatchSize: 4,
    contextLength: 1024,
  });
  assert.deepEqual(
    resolveSettings({ minInstances: 1, maxInstances: 3, maxBatchSize: 2, contextLength: 512 }, { minInstances: 0 }, LIMITS),
    { minInstances: 0, maxInstances: 3, maxBatchSize: 2, contextLength: 512 },
  );
  const param = (fn: () => unknown) => {
    try {
      fn();
    } catch (error) {
      return (error as { param: string }).param;
    }
    return "no error";
  };
  assert.equal(
    param(() => resolveSettings(undefined, { minInstances: -1 }, LIMITS)),
    "min_instances",
  );
  assert.equal(
    param(() => resolveSettings(undefined, { maxInstances: 0 }, LIMITS)),
    "max_instances",
  );
  assert.equal(
    param(() => resolveSettings(undefined, { minInstances: 3, maxInstances: 2 }, LIMITS)),
    "min_instances",
  );
  assert.equal(
    param(() => resolveSettings(undefined, { maxBatchSize: 0 }, LIMITS)),
    "max_batch_size",
  );
  assert.equal(
    param(() => resolveSettings(undefined, { maxInstances: 99 }, LIMITS)),
    "max_instances",
  );
  assert.equal(
    param(() => resolveSettings(undefined, { maxBatchSize: LIMITS.maxBatchSize + 1 }, LIMITS)),
    "max_batch_size",
    "the server's batch cap",
  );
  assert.equal(
    param(() => resolveSettings(undefined, { contextLength: 255 }, LIMITS)),
    "context_length",
  );
  assert.equal(
    param(() => resolveSettings(undefined, { contextLength: LIMITS.maxContext + 1 }, LIMITS)),
    "context_length",
  );
});

const SETTINGS = { minInstances: 1, maxInstances: 1, maxBatchSize: 2, contextLength: null };

/** Rows made here are paid by no key (the budget tests below name one). */
function insertDeployment(db: Database, input: Omit<Parameters<typeof insertWithLimits>[1], "keyId"> & { keyId?: string | null }) {
  return insertWithLimits(db, { keyId: null, ...input }, LIMITS);
}

/** Moves an interval into the past, as if it had run `ms` and last beat `beatAgoMs` ago. */
async function backdate(db: Database, id: string, ms: number, beatAgoMs: number): Promise<void> {
  await db.query(
    `UPDATE deployment_instances
        SET started_at = started_at - make_interval(secs => $2::double precision / 1000),
            billed_until = billed_until - make_interval(secs => $2::double precision / 1000),
            heartbeat_at = heartbeat_at - make_interval(secs => $3::double precision / 1000)
      WHERE id = $1`,
    [id, ms, beatAgoMs],
  );
}

forEachDatabase("deployment store and instance metering", ({ db }) => {
  test("names are unique per account among live deployments, and scoped reads see only the account's own", async () => {
    const alice = await findOrCreateAccount(db, "alice-store");
    const bob = await findOrCreateAccount(db, "bob-store");
    const first = await insertDeployment(db, {
      accountId: alice.id,
      model: "m/x",
      name: "bot",
      status: "initializing",
      settings: SETTINGS,
      ownerId: "own_a",
    });
    assert.match(first.id, /^dep_/);
    assert.equal(first.accountName, "alice-store");
    await assert.rejects(
      insertDeployment(db, {
        accountId: alice.id,
        model: "m/x",
        name: "bot",
        status: "initializing",
        settings: SETTINGS,
        ownerId: "own_a",
      }),
      { status: 400, code: "deployment_exists" },
    );
    await insertDeployment(db, {
      accountId: bob.id,
      model: "m/x",
      name: "bot",
      status: "initializing",
      settings: SETTINGS,
      ownerId: "own_a",
    });
    assert.equal(await findDeployment(db, first.id, { accountId: bob.id }), null);
    assert.deepEqual(
      (await listDeployments(db, bob.id)).map((d) => d.accountId),
      [bob.id],
    );
    await markDeleting(db, first.id);
    const again = await insertDeployment(db, {
      accountId: alice.id,
      model: "m/x",
      name: "bot",
      status: "initializing",
      settings: SETTINGS,
      ownerId: "own_a",
    });
    assert.notEqual(again.id, first.id);
  });

  test("an interval is billed in segments exactly once; a dead owner's is closed at its last heartbeat", async () => {
    const account = await findOrCreateAccount(db, "meter");
    const dep = await insertDeployment(db, {
      accountId: account.id,
      model: "m/x",
      name: "metered",
      status: "running",
      settings: SETTINGS,
      ownerId: "own_dead",
    });
    const meter = createInstanceMeter(db, "own_dead", 1000);
    const id = newInstanceId();
    await meter.open(id, dep.id, "0.36");
    // It ran 2.5 s and last beat 0.25 s ago; then its process died.
    await backdate(db, id, 2500, 250);
    const closed = await closeDeadIntervals(db, "own_self", async (_tx, owner) => owner === "own_dead", 1000);
    assert.equal(closed, 1);
    const rows = await db.query<{ seconds: string; cost: string }>(
      "SELECT seconds::text AS seconds, cost_usd::text AS cost FROM deployment_usage WHERE instance_id = $1 ORDER BY start_at",
      [id],
    );
    assert.deepEqual(rows.map((r) => r.seconds).map(Number), [1, 1, 0.25]);
    // Billing again changes nothing: billed_until already reached the end.
    await db.transaction((tx) => billInstance(tx, id, 1000));
    assert.equal(await closeDeadIntervals(db, "own_self", async () => true, 1000), 0);
    const usage = await queryInstanceUsage(db, { accountId: account.id });
    assert.equal(usage.instance_seconds, "2.25");
    assert.equal(usage.cost_usd, "0.000225"); // 2.25 s × 0.36 / 3600, exactly
    assert.deepEqual(
      usage.data.map((d) => d.model_id),
      ["meter/metered"],
    );
  });

  test("a live owner's heartbeat bills whole segments; closing bills the rest up to now", async () => {
    const account = await findOrCreateAccount(db, "beat");
    const dep = await insertDeployment(db, {
      accountId: account.id,
      model: "m/x",
      name: "beating",
      status: "running",
      settings: SETTINGS,
      ownerId: "own_live",
    });
    const meter = createInstanceMeter(db, "own_live", 1000);
    const id = newInstanceId();
    await meter.open(id, dep.id, "0.36");
    await backdate(db, id, 3200, 3200);
    await meter.heartbeat();
    const whole = await db.query<{ n: string }>("SELECT count(*)::text AS n FROM deployment_usage WHERE instance_id = $1", [id]);
    assert.equal(whole[0]!.n, "3");
    // A live owner is never closed by others.
    assert.equal(await closeDeadIntervals(db, "own_other", async () => false, 1000), 0);
    await meter.close(id);
    const [interval] = await db.query<{ ms: string; billed: boolean }>(
      "SELECT (extract(epoch FROM ended_at - started_at) * 1000)::bigint::text AS ms, billed_until = ended_at AS billed FROM deployment_instances WHERE id = $1",
      [id],
    );
    assert.equal(interval!.billed, true);
    const usage = await queryInstanceUsage(db, { accountId: account.id });
    assert.equal(Number(usage.instance_seconds) * 1000, Number(interval!.ms), "every millisecond it ran, billed once");
    assert.equal(usage.cost_usd, instanceTimeCost(usage.instance_seconds, "0.36"));
  });
});
