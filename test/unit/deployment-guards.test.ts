import assert from "node:assert/strict";
import { homedir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { createKey, findOrCreateAccount, listKeys } from "../../src/accounts/key-store.js";
import { assertBudgetCovers, holdInstanceTime, releaseInstanceHold } from "../../src/billing/instance-budget.js";
import { findPulledModel } from "../../src/catalog/pull.js";
import { loadCatalog } from "../../src/catalog/load.js";
import { readKvShape } from "../../src/deployments/gguf-shape.js";
import { instanceBytes, INSTANCE_OVERHEAD_BYTES, kvBytesPerCell, MemoryGuard } from "../../src/deployments/memory-guard.js";
import { billInstance, createInstanceMeter, newInstanceId } from "../../src/deployments/metering.js";
import { insertDeployment, updateSettings } from "../../src/deployments/deployment-store.js";
import { DEFAULT_DEPLOYMENT_LIMITS } from "../../src/deployments/types.js";
import type { Database } from "../../src/storage/database.js";
import { forEachDatabase } from "../helpers/databases.js";

/** Issue 20, item 2: the memory estimate, the per-account caps and instance time against a key's budget. */

test("the KV shape comes from the GGUF header: SmolLM2-135M costs 23,040 bytes a cell, so 32 × 8192 cells are 6 GB", async () => {
  const [entry] = (await loadCatalog()).filter((m) => m.id === "HuggingFaceTB/SmolLM2-135M-Instruct");
  const file = await findPulledModel(entry!, process.env.SWITCHYARD_MODELS_DIR ?? join(homedir(), ".cache/switchyard/models"));
  assert.ok(file, "the test setup pulled SmolLM2");
  const shape = await readKvShape(file.path);
  assert.deepEqual(shape, { layers: 30, kvHeads: 3, keyLength: 64, valueLength: 64 });
  assert.equal(kvBytesPerCell(shape), 23_040);
  const bytes = instanceBytes({ fileBytes: file.bytes, shape, sequences: 32, cellsPerSequence: 8192 });
  assert.equal(bytes, file.bytes + 6_039_797_760 + INSTANCE_OVERHEAD_BYTES);
});

test("the memory guard refuses what does not fit with a 400 insufficient_memory, and counts what it holds", () => {
  const guard = new MemoryGuard(1000);
  const held = guard.hold(600);
  assert.equal(guard.left(), 400);
  assert.throws(() => guard.hold(500), { status: 400, code: "insufficient_memory", param: "max_batch_size" });
  assert.throws(() => guard.check(300, 2), { code: "insufficient_memory" });
  guard.check(400);
  held.release();
  held.release(); // twice is once
  assert.equal(guard.left(), 1000);
  // Without a limit: what the machine has, less headroom, less what is still loading.
  let available = 100 * 2 ** 30;
  const machine = new MemoryGuard(undefined, () => available);
  const loading = machine.hold(2 ** 30);
  const before = machine.left();
  loading.loaded(); // now the machine's own figure shows it
  assert.equal(machine.left(), before + 2 ** 30);
  available = 0;
  assert.throws(() => machine.check(1), { code: "insufficient_memory" });
});

const SETTINGS = { minInstances: 1, maxInstances: 1, maxBatchSize: 2, contextLength: null };
const CAPS = { ...DEFAULT_DEPLOYMENT_LIMITS, deploymentsPerAccount: 2, instancesPerAccount: 3 };

async function spentAndHeld(db: Database, keyId: string): Promise<{ spent: string; held: string }> {
  const [row] = await db.query<{ spent: string; held: string }>(
    "SELECT k.spent_usd::text AS spent, (SELECT COALESCE(sum(amount_usd), 0)::text FROM budget_reservations r WHERE r.key_id = k.id) AS held FROM api_keys k WHERE k.id = $1",
    [keyId],
  );
  return { spent: String(Number(row!.spent)), held: String(Number(row!.held)) };
}

forEachDatabase("per-account deployment caps and instance time against budgets", ({ db }) => {
  test("an account gets at most N deployments and M instances (max_instances summed), even when creates race", async () => {
    const account = await findOrCreateAccount(db, "capped");
    const insert = (name: string, maxInstances = 1) =>
      insertDeployment(
        db,
        {
          accountId: account.id,
          keyId: null,
          model: "m/x",
          name,
          status: "stopped",
          settings: { ...SETTINGS, maxInstances },
          ownerId: "own",
        },
        CAPS,
      );
    const results = await Promise.allSettled(["a", "b", "c", "d", "e"].map((name) => insert(name)));
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 2, "two of five concurrent creates");
    const refused = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    assert.equal(refused.reason.code, "too_many_deployments");
    assert.equal(refused.reason.status, 400);
    const other = await findOrCreateAccount(db, "capped-instances");
    const first = await insertDeployment(
      db,
      {
        accountId: other.id,
        keyId: null,
        model: "m/x",
        name: "one",
        status: "stopped",
        settings: { ...SETTINGS, maxInstances: 2 },
        ownerId: "own",
      },
      CAPS,
    );
    await assert.rejects(
      insertDeployment(
        db,
        {
          accountId: other.id,
          keyId: null,
          model: "m/x",
          name: "two",
          status: "stopped",
          settings: { ...SETTINGS, maxInstances: 2 },
          ownerId: "own",
        },
        CAPS,
      ),
      { code: "too_many_instances", param: "max_instances" },
    );
    await assert.rejects(updateSettings(db, first, { ...SETTINGS, maxInstances: 4 }, CAPS), { code: "too_many_instances" });
    await updateSettings(db, first, { ...SETTINGS, maxInstances: 3 }, CAPS);
  });

  test("an instance holds one segment of its key's budget ahead; billing adds to spend exactly and holds the next, until the budget cannot", async () => {
    // 0.36/h for 1 s segments: 0.0001 a segment. A budget of 0.00025 covers two and a half.
    const key = await createKey(db, { account: "payer", budgetUsd: "0.00025" });
    const account = await findOrCreateAccount(db, "payer");
    const dep = await insertDeployment(
      db,
      { accountId: account.id, keyId: key.id, model: "m/x", name: "paid", status: "running", settings: SETTINGS, ownerId: "own_pay" },
      CAPS,
    );
    await assertBudgetCovers(db, key.id, "0.0002", "two");
    await assert.rejects(assertBudgetCovers(db, key.id, "0.0003", "three"), { status: 402, code: "insufficient_quota" });
    const id = newInstanceId();
    await holdInstanceTime(db, key.id, id, "0.0001", 60_000);
    assert.deepEqual(await spentAndHeld(db, key.id), { spent: "0", held: "0.0001" });
    // An instance whose load fails gives its hold back.
    const failedLoad = newInstanceId();
    await holdInstanceTime(db, key.id, failedLoad, "0.0001", 60_000);
    assert.deepEqual(await spentAndHeld(db, key.id), { spent: "0", held: "0.0002" });
    await releaseInstanceHold(db, failedLoad);
    assert.deepEqual(await spentAndHeld(db, key.id), { spent: "0", held: "0.0001" });
    const meter = createInstanceMeter(db, "own_pay", 1000);
    await meter.open(id, dep.id, "0.36");
    // As if it ran 1.5 s: one whole segment is billed, the next one held.
    await db.query(
      "UPDATE deployment_instances SET started_at = started_at - interval '1.5 s', billed_until = billed_until - interval '1.5 s' WHERE id = $1",
      [id],
    );
    assert.deepEqual(await meter.heartbeat(), new Set());
    assert.deepEqual(await spentAndHeld(db, key.id), { spent: "0.0001", held: "0.0001" });
    // Another whole segment: spent 0.0002, and 0.00005 left cannot cover the next: not held, the deployment is named.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    assert.deepEqual(await meter.heartbeat(), new Set([dep.id]));
    assert.deepEqual(await spentAndHeld(db, key.id), { spent: "0.0002", held: "0" });
    await assert.rejects(holdInstanceTime(db, key.id, newInstanceId(), "0.0001", 60_000), { status: 402 });
    // Closing bills the rest exactly and leaves no hold behind.
    await meter.close(id);
    await db.transaction((tx) => billInstance(tx, id, 1000));
    const [billed] = await db.query<{ cost: string }>("SELECT sum(cost_usd)::text AS cost FROM deployment_usage WHERE instance_id = $1", [
      id,
    ]);
    const spent = (await listKeys(db, { account: "payer" }))[0]!.spentUsd;
    assert.equal(spent, String(Number(billed!.cost)), "the key's spend is exactly the instance time billed");
    assert.equal((await spentAndHeld(db, key.id)).held, "0");
  });
});
