import assert from "node:assert/strict";
import { before, test } from "node:test";
import { createKey, findAccount } from "../../src/accounts/key-store.js";
import { createUsageLedger, queryUsage, UNKNOWN_MODEL_GROUP } from "../../src/billing/ledger.js";
import { forEachDatabase } from "../helpers/databases.js";
import { usage } from "../helpers/usage.js";

// A tenant that sends many model names that do not exist gets one 404 row each; grouped by model,
// they are one group (issue 54's probe listed every string it sent as a group of its own).

forEachDatabase("usage grouped by model", ({ db }) => {
  let accountId = "";
  let keyId = "";
  before(async () => {
    keyId = (await createKey(db, { account: "alpha" })).id;
    accountId = (await findAccount(db, "alpha"))!.id;
    const ledger = createUsageLedger(db);
    const refused = { status: "rejected" as const, errorCode: "model_not_found", promptTokens: 0, completionTokens: 0, costUsd: "0" };
    for (const model of ["no/such-model", "x".repeat(200), "another-made-up-name"])
      await ledger.record(usage(accountId, keyId, { model, ...refused }));
    await ledger.record(usage(accountId, keyId, { model: "m/real", costUsd: "0.5" }));
    await ledger.record(usage(accountId, keyId, { model: "m/real", status: "rejected", errorCode: "rate_limit_exceeded", costUsd: "0" }));
  });

  test("requests refused for a model that does not exist group under one entry; a real model's refusals stay with it", async () => {
    const report = await queryUsage(db, { accountId, groupBy: "model" });
    assert.deepEqual(
      report.groups.map((g) => [g.group, g.requests, g.by_status.rejected]),
      [
        [UNKNOWN_MODEL_GROUP, 3, 3],
        ["m/real", 2, 1],
      ],
    );
    assert.equal(report.totals.requests, 5);
  });
});
