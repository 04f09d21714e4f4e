import assert from "node:assert/strict";
import { test } from "node:test";
import { findOrCreateAccount } from "../../src/accounts/key-store.js";
import {
  checkAccountRoom,
  findAdapter,
  goneAdapterIds,
  insertAdapter,
  listAdapters,
  markDeleted,
  newAdapterId,
  setStatus,
} from "../../src/adapters/adapter-store.js";
import { DEFAULT_ADAPTER_LIMITS, type Adapter } from "../../src/adapters/types.js";
import { insertDeployment } from "../../src/deployments/deployment-store.js";
import { DEFAULT_DEPLOYMENT_LIMITS } from "../../src/deployments/types.js";
import { StepGate } from "../../src/engine/core/step-gate.js";
import { forEachDatabase } from "../helpers/databases.js";

// Uploaded adapters' rows on both databases (the per-account cap and the one namespace an
// adapter's and a deployment's `<account>/<name>` share), and the gate that keeps a change to a
// model's adapters out of its steps. The upload itself is tested end to end in
// test/integration/adapter-uploads.test.ts.

const LIMITS = { ...DEFAULT_ADAPTER_LIMITS, perAccount: 2 };

const adapter = (accountId: string, name: string): Omit<Adapter, "modelId"> => ({
  id: newAdapterId(),
  accountId,
  name,
  baseModel: "HuggingFaceTB/SmolLM2-135M-Instruct",
  format: "peft",
  bytes: 1234,
  sha256: "ab".repeat(32),
  status: "ready",
  failReason: null,
  createdAt: new Date("2026-11-28T12:00:00Z"),
});

forEachDatabase("uploaded adapters' rows", ({ db }) => {
  test("an account keeps at most its cap; a name is one model id, whether an adapter's or a deployment's", async () => {
    const acme = await findOrCreateAccount(db, "acme");
    const other = await findOrCreateAccount(db, "other");
    const first = await insertAdapter(db, adapter(acme.id, "support"), LIMITS);
    assert.equal(first.modelId, "acme/support");
    assert.equal(first.createdAt.toISOString(), "2026-11-28T12:00:00.000Z");
    await assert.rejects(insertAdapter(db, adapter(acme.id, "support"), LIMITS), { status: 409, code: "name_taken", param: "name" });
    // Another account's name is its own.
    await insertAdapter(db, adapter(other.id, "support"), LIMITS);
    const deployment = { accountId: acme.id, keyId: null, model: "m/x", status: "stopped" as const, ownerId: "own" };
    const settings = { minInstances: 0, maxInstances: 1, maxBatchSize: 1, contextLength: null };
    await assert.rejects(insertDeployment(db, { ...deployment, name: "support", settings }, DEFAULT_DEPLOYMENT_LIMITS), {
      status: 400,
      code: "name_taken",
    });
    await insertDeployment(db, { ...deployment, name: "bot", settings }, DEFAULT_DEPLOYMENT_LIMITS);
    await assert.rejects(insertAdapter(db, adapter(acme.id, "bot"), LIMITS), { status: 409, code: "name_taken" });
    await insertAdapter(db, adapter(acme.id, "second"), LIMITS);
    await assert.rejects(insertAdapter(db, adapter(acme.id, "third"), LIMITS), { status: 400, code: "too_many_adapters" });
    await assert.rejects(checkAccountRoom(db, acme.id, null, LIMITS), { code: "too_many_adapters" });
    assert.deepEqual((await listAdapters(db, acme.id)).map((a) => a.name).sort(), ["second", "support"]);
  });

  test("a deleted adapter is gone for its account and frees its name and its place; another account never sees it", async () => {
    const acme = await findOrCreateAccount(db, "acme");
    const other = await findOrCreateAccount(db, "other");
    const [kept] = await listAdapters(db, acme.id);
    assert.equal(await findAdapter(db, kept!.id, other.id), null, "another account's id reads as absent");
    assert.equal(await markDeleted(db, other.id, kept!.id), null, "and cannot be deleted by it");
    assert.equal((await markDeleted(db, acme.id, kept!.id))?.id, kept!.id);
    assert.equal(await markDeleted(db, acme.id, kept!.id), null, "deleted once");
    assert.equal(await findAdapter(db, kept!.id, acme.id), null);
    assert.deepEqual(await goneAdapterIds(db, [kept!.id, "adp_never"]), [kept!.id, "adp_never"]);
    const again = await insertAdapter(db, adapter(acme.id, kept!.name), LIMITS);
    assert.deepEqual(await goneAdapterIds(db, [again.id]), []);
    await setStatus(db, again.id, "failed", "its file is \u0000missing");
    const failed = await findAdapter(db, again.id, acme.id);
    assert.equal(failed?.status, "failed");
    assert.equal(failed?.failReason, "its file is missing", "a reason is stored without NUL");
  });
});

test("the step gate: a change waits for the steps in flight, and steps wait for the change", async () => {
  const gate = new StepGate();
  const order: string[] = [];
  await gate.enterStep();
  const change = gate.exclusive(() => {
    order.push("change");
    return 7;
  });
  await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(order.length, 0, "the change waits for the step in flight");
  const nextStep = gate.enterStep().then(() => order.push("step"));
  gate.leaveStep();
  assert.equal(await change, 7);
  await nextStep;
  assert.deepEqual(order, ["change", "step"], "a step that came during the wait runs after the change");
  gate.leaveStep();
  // Changes run one at a time, and one that throws frees the gate.
  await assert.rejects(
    gate.exclusive(() => {
      throw new Error("refused");
    }),
    /refused/,
  );
  await gate.enterStep();
  gate.leaveStep();
});
