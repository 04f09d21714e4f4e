import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { createKey, findAccount } from "../../src/accounts/key-store.js";
import { createUsageLedger, queryUsage } from "../../src/billing/ledger.js";
import { parseUsageParams, parseUsageTime } from "../../src/protocol/usage-request.js";
import { parseWireUsageReport as parseWireUsage, toWireUsageReport as toWireUsage } from "../../src/protocol/usage.js";
import { stringifyJson } from "../../src/protocol/money-json.js";
import { InvalidRequest } from "../../src/errors.js";
import type { UsageRecord } from "../../src/billing/ports.js";
import type { Database } from "../../src/storage/database.js";
import { forEachDatabase } from "../helpers/databases.js";
import { usage } from "../helpers/usage.js";

/** Ids of an account (created with its key) and the key. */
async function accountWithKey(db: Database, account: string): Promise<{ accountId: string; keyId: string }> {
  const key = await createKey(db, { account });
  const found = await findAccount(db, account);
  return { accountId: found!.id, keyId: key.id };
}

async function setCreatedAt(db: Database, requestId: string, at: string): Promise<void> {
  await db.query("UPDATE usage_records SET created_at = $2::timestamptz WHERE request_id = $1", [requestId, at]);
}

forEachDatabase("usage ledger", ({ db }) => {
  test("markUndelivered turns a completed row into failed with the code, cost kept; any other row stays as it is", async () => {
    const { accountId, keyId } = await accountWithKey(db, "undelivered");
    const ledger = createUsageLedger(db);
    const completed = usage(accountId, keyId, { costUsd: "0.000002" });
    const cancelled = usage(accountId, keyId, { status: "cancelled" });
    await ledger.record(completed);
    await ledger.record(cancelled);
    await ledger.markUndelivered(completed.requestId, "response_not_stored");
    await ledger.markUndelivered(cancelled.requestId, "response_not_stored");
    const rows = await db.query<{ request_id: string; status: string; error_code: string | null; cost_usd: string }>(
      "SELECT request_id, status, error_code, cost_usd::text AS cost_usd FROM usage_records WHERE request_id = ANY($1::text[])",
      [[completed.requestId, cancelled.requestId]],
    );
    assert.deepEqual(
      rows.find((r) => r.request_id === completed.requestId),
      { request_id: completed.requestId, status: "failed", error_code: "response_not_stored", cost_usd: "0.000002" },
    );
    assert.equal(rows.find((r) => r.request_id === cancelled.requestId)?.status, "cancelled");
  });

  test("record writes one row with the exact cost; recording the same request again changes nothing", async () => {
    const { accountId, keyId } = await accountWithKey(db, "once");
    const ledger = createUsageLedger(db);
    const record = usage(accountId, keyId, { costUsd: "0.000014357", cachedTokens: 4, queueMs: null, ttftMs: null, finishReason: null });
    await ledger.record(record);
    await ledger.record({ ...record, costUsd: "99", promptTokens: 1_000, status: "failed" }); // a retry: ignored

    const rows = await db.query<Record<string, unknown>>("SELECT * FROM usage_records WHERE request_id = $1", [record.requestId]);
    assert.equal(rows.length, 1);
    const row = rows[0]!;
    assert.equal(row.cost_usd, "0.000014357");
    assert.equal(row.prompt_tokens, 10);
    assert.equal(row.cached_tokens, 4);
    assert.equal(row.status, "completed");
    assert.equal(row.queue_ms, null);
    assert.equal(row.finish_reason, null);
    assert.equal(row.service_tier, "default");

    const report = await queryUsage(db, { accountId });
    assert.equal(report.totals.requests, 1);
    assert.equal(report.totals.cost_usd, "0.000014357");
  });

  test("an unreserved row charges the key's spend its cost as it is inserted, once; a reserved one only what its reservation held", async () => {
    const { accountId, keyId } = await accountWithKey(db, "unreserved");
    const ledger = createUsageLedger(db);
    const spent = async () =>
      (await db.query<{ spent: string }>("SELECT spent_usd::text AS spent FROM api_keys WHERE id = $1", [keyId]))[0]!.spent;
    const direct = usage(accountId, keyId, { costUsd: "0.000000123", unreserved: true });
    await Promise.all([ledger.record(direct), ledger.record(usage(accountId, keyId, { costUsd: "0.5", unreserved: true }))]);
    assert.equal(Number(await spent()), 0.500000123);
    await ledger.record({ ...direct, costUsd: "7" }); // the same request again: no row inserted, nothing charged
    assert.equal(Number(await spent()), 0.500000123);
    // Without the flag, a row with no reservation charges nothing (its reservation was its bill).
    await ledger.record(usage(accountId, keyId, { costUsd: "3" }));
    assert.equal(Number(await spent()), 0.500000123);
  });

  test("concurrent duplicate records still write exactly one row", async () => {
    const { accountId, keyId } = await accountWithKey(db, "concurrent");
    const ledger = createUsageLedger(db);
    const record = usage(accountId, keyId);
    await Promise.all([ledger.record(record), ledger.record(record), ledger.record(record)]);
    const [row] = await db.query<{ n: string }>("SELECT count(*)::text AS n FROM usage_records WHERE request_id = $1", [record.requestId]);
    assert.equal(row!.n, "1");
  });

  test("record refuses a cost that is not an exact decimal string, and bad counts", async () => {
    const { accountId, keyId } = await accountWithKey(db, "refused");
    const ledger = createUsageLedger(db);
    await assert.rejects(ledger.record(usage(accountId, keyId, { costUsd: "1e-9" })), TypeError);
    await assert.rejects(ledger.record(usage(accountId, keyId, { costUsd: 0.1 as unknown as string })), TypeError);
    await assert.rejects(ledger.record(usage(accountId, keyId, { costUsd: "-1" })), TypeError);
    await assert.rejects(ledger.record(usage(accountId, keyId, { promptTokens: 1.5 })), RangeError);
    assert.equal((await queryUsage(db, { accountId })).totals.requests, 0);
  });

  test("costs sum exactly in SQL numeric: 0.000000001 + 0.1 + 0.2 = 0.300000001", async () => {
    const { accountId, keyId } = await accountWithKey(db, "exact");
    const ledger = createUsageLedger(db);
    for (const costUsd of ["0.000000001", "0.1", "0.2"]) await ledger.record(usage(accountId, keyId, { costUsd }));
    const report = await queryUsage(db, { accountId });
    assert.equal(report.totals.cost_usd, "0.300000001");
    assert.equal(report.totals.requests, 3);
    assert.deepEqual(report.groups, []);
    // On the wire it is a bare JSON number with exactly that text.
    const json = stringifyJson(toWireUsage(report, {}));
    assert.match(json, /"cost_usd":0\.300000001[,}]/);
    assert.equal(parseWireUsage(json).totals.cost_usd, "0.300000001");
  });

  test("trailing zeros of stored costs do not leak into sums", async () => {
    const { accountId, keyId } = await accountWithKey(db, "zeros");
    const ledger = createUsageLedger(db);
    await ledger.record(usage(accountId, keyId, { costUsd: "0.100" }));
    await ledger.record(usage(accountId, keyId, { costUsd: "0.2000" }));
    assert.equal((await queryUsage(db, { accountId })).totals.cost_usd, "0.3");
  });

  test("an account without usage gets zero totals, every status at zero", async () => {
    const { accountId } = await accountWithKey(db, "idle");
    const report = await queryUsage(db, { accountId, groupBy: "model" });
    assert.deepEqual(report, {
      totals: {
        requests: 0,
        prompt_tokens: 0,
        cached_tokens: 0,
        completion_tokens: 0,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0,
        total_tokens: 0,
        cost_usd: "0",
        by_status: { completed: 0, cancelled: 0, failed: 0, rejected: 0, expired: 0, in_flight: 0, interrupted: 0 },
      },
      groups: [],
    });
  });

  test("prediction counts are kept on the row (the rejected ones inside completion_tokens) and summed in the report", async () => {
    const { accountId, keyId } = await accountWithKey(db, "predicted");
    const ledger = createUsageLedger(db);
    const edited = usage(accountId, keyId, {
      completionTokens: 47,
      acceptedPredictionTokens: 30,
      rejectedPredictionTokens: 7,
      costUsd: "0.000282",
    });
    const plain = usage(accountId, keyId, { model: "m/other", completionTokens: 5 });
    await ledger.record(edited);
    await ledger.record(plain);
    const [row] = await db.query<{
      completion_tokens: number;
      accepted_prediction_tokens: number;
      rejected_prediction_tokens: number;
      cost_usd: string;
    }>(
      "SELECT completion_tokens, accepted_prediction_tokens, rejected_prediction_tokens, cost_usd::text AS cost_usd FROM usage_records WHERE request_id = $1",
      [edited.requestId],
    );
    assert.deepEqual(row, { completion_tokens: 47, accepted_prediction_tokens: 30, rejected_prediction_tokens: 7, cost_usd: "0.000282" });
    const report = await queryUsage(db, { accountId, groupBy: "model" });
    assert.equal(report.totals.completion_tokens, 52);
    assert.equal(report.totals.accepted_prediction_tokens, 30);
    assert.equal(report.totals.rejected_prediction_tokens, 7);
    assert.deepEqual(
      report.groups.map((g) => [g.group, g.accepted_prediction_tokens, g.rejected_prediction_tokens]),
      [
        ["m/other", 0, 0],
        ["qwen/qwen3-0.6b", 30, 7],
      ],
    );
    const wire = stringifyJson(toWireUsage(report, {}));
    assert.match(wire, /"accepted_prediction_tokens":30,"rejected_prediction_tokens":7,/);
    assert.equal(parseWireUsage(wire).totals.rejected_prediction_tokens, 7);
  });

  describe("grouping and filtering", () => {
    let accountId: string;
    let keyA: string;
    let keyB: string;
    const ids: Record<string, string> = {};

    before(async () => {
      ({ accountId, keyId: keyA } = await accountWithKey(db, "grouped"));
      keyB = (await createKey(db, { account: "grouped" })).id;
      const ledger = createUsageLedger(db);
      const rows: Array<[string, Partial<UsageRecord>, string]> = [
        [
          "r1",
          { keyId: keyA, model: "m/alpha", promptTokens: 100, cachedTokens: 40, completionTokens: 10, costUsd: "0.000000001" },
          "2025-01-01T00:00:00Z",
        ],
        [
          "r2",
          {
            keyId: keyA,
            model: "m/beta",
            promptTokens: 200,
            completionTokens: 20,
            costUsd: "0.1",
            status: "cancelled",
            finishReason: "cancelled",
          },
          "2025-01-01T23:59:59.999Z",
        ],
        ["r3", { keyId: keyB, model: "m/alpha", promptTokens: 300, completionTokens: 30, costUsd: "0.2" }, "2025-01-02T00:00:00Z"],
        [
          "r4",
          {
            keyId: keyB,
            model: "m/beta",
            promptTokens: 7,
            completionTokens: 0,
            costUsd: "0",
            status: "rejected",
            errorCode: "rate_limit_exceeded",
          },
          "2025-01-03T12:00:00+02:00",
        ],
      ];
      for (const [name, overrides, at] of rows) {
        const record = usage(accountId, keyA, overrides);
        ids[name] = record.requestId;
        await ledger.record(record);
        await setCreatedAt(db, record.requestId, at);
      }
    });

    test("totals cover every row and status", async () => {
      const { totals } = await queryUsage(db, { accountId });
      assert.deepEqual(totals, {
        requests: 4,
        // r4 was rejected: its 7 prompt tokens were never consumed, so they are not counted.
        prompt_tokens: 600,
        cached_tokens: 40,
        completion_tokens: 60,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0,
        total_tokens: 660,
        cost_usd: "0.300000001",
        by_status: { completed: 2, cancelled: 1, failed: 0, rejected: 1, expired: 0, in_flight: 0, interrupted: 0 },
      });
    });

    test("group by model", async () => {
      const { groups, totals } = await queryUsage(db, { accountId, groupBy: "model" });
      assert.deepEqual(
        groups.map((g) => [g.group, g.requests, g.prompt_tokens, g.cached_tokens, g.completion_tokens, g.total_tokens, g.cost_usd]),
        [
          ["m/alpha", 2, 400, 40, 40, 440, "0.200000001"],
          ["m/beta", 2, 200, 0, 20, 220, "0.1"],
        ],
      );
      assert.deepEqual(groups[1]!.by_status, {
        completed: 0,
        cancelled: 1,
        failed: 0,
        rejected: 1,
        expired: 0,
        in_flight: 0,
        interrupted: 0,
      });
      assert.equal(totals.requests, 4);
      assert.equal(totals.cost_usd, "0.300000001");
    });

    test("group by UTC day", async () => {
      const { groups } = await queryUsage(db, { accountId, groupBy: "day" });
      // r2 is the last millisecond of Jan 1 UTC; r4 is 10:00 UTC on Jan 3.
      assert.deepEqual(
        groups.map((g) => [g.group, g.requests, g.cost_usd]),
        [
          ["2025-01-01", 2, "0.100000001"],
          ["2025-01-02", 1, "0.2"],
          ["2025-01-03", 1, "0"],
        ],
      );
    });

    test("group by key", async () => {
      const { groups } = await queryUsage(db, { accountId, groupBy: "key" });
      const byKey = Object.fromEntries(groups.map((g) => [g.group, [g.requests, g.total_tokens, g.cost_usd]]));
      assert.deepEqual(byKey, { [keyA]: [2, 330, "0.100000001"], [keyB]: [2, 330, "0.2"] });
      assert.deepEqual(
        groups.map((g) => g.group),
        [keyA, keyB].sort(),
      );
    });

    test("start is inclusive, end exclusive", async () => {
      const start = new Date("2025-01-01T23:59:59.999Z");
      const end = new Date("2025-01-02T00:00:00Z");
      const justR2 = await queryUsage(db, { accountId, start, end });
      assert.equal(justR2.totals.requests, 1);
      assert.equal(justR2.totals.cost_usd, "0.1");

      const fromJan2 = await queryUsage(db, { accountId, start: new Date("2025-01-02T00:00:00Z"), groupBy: "day" });
      assert.deepEqual(
        fromJan2.groups.map((g) => g.group),
        ["2025-01-02", "2025-01-03"],
      );
      assert.equal(fromJan2.totals.cost_usd, "0.2");

      const beforeJan2 = await queryUsage(db, { accountId, end: new Date("2025-01-02T00:00:00Z") });
      assert.equal(beforeJan2.totals.requests, 2);
      assert.equal(beforeJan2.totals.cost_usd, "0.100000001");

      const nothing = await queryUsage(db, { accountId, start: new Date("2030-01-01T00:00:00Z"), groupBy: "model" });
      assert.equal(nothing.totals.requests, 0);
      assert.deepEqual(nothing.groups, []);
    });

    test("one account never sees another's rows", async () => {
      const other = await accountWithKey(db, "other-account");
      const ledger = createUsageLedger(db);
      await ledger.record(usage(other.accountId, other.keyId, { model: "m/alpha", costUsd: "5" }));
      await setCreatedAt(
        db,
        (await db.query<{ request_id: string }>("SELECT request_id FROM usage_records WHERE account_id = $1", [other.accountId]))[0]!
          .request_id,
        "2025-01-01T12:00:00Z",
      );

      const mine = await queryUsage(db, { accountId, groupBy: "key" });
      assert.equal(mine.totals.requests, 4);
      assert.equal(mine.totals.cost_usd, "0.300000001");
      assert.ok(mine.groups.every((g) => g.group !== other.keyId));

      const theirs = await queryUsage(db, { accountId: other.accountId, groupBy: "model" });
      assert.equal(theirs.totals.requests, 1);
      assert.equal(theirs.totals.cost_usd, "5");
      assert.deepEqual(
        theirs.groups.map((g) => [g.group, g.requests]),
        [["m/alpha", 1]],
      );

      assert.equal((await queryUsage(db, { accountId: "acct_nobody" })).totals.requests, 0);
    });
  });
});

describe("usage parameters", () => {
  test("times: Unix seconds, ISO dates (UTC midnight), date-times with and without offsets", () => {
    assert.equal(parseUsageTime("1735689600", "start").toISOString(), "2025-01-01T00:00:00.000Z");
    assert.equal(parseUsageTime("1735689600.25", "start").toISOString(), "2025-01-01T00:00:00.250Z");
    assert.equal(parseUsageTime("2025-01-01", "start").toISOString(), "2025-01-01T00:00:00.000Z");
    assert.equal(parseUsageTime("2025-01-01T12:30", "start").toISOString(), "2025-01-01T12:30:00.000Z");
    assert.equal(parseUsageTime("2025-01-01T12:30:15.5Z", "start").toISOString(), "2025-01-01T12:30:15.500Z");
    assert.equal(parseUsageTime("2025-01-01T12:00:00+02:00", "start").toISOString(), "2025-01-01T10:00:00.000Z");
    assert.equal(parseUsageTime("2025-01-01T12:00:00-0530", "start").toISOString(), "2025-01-01T17:30:00.000Z");
    // An unencoded "+" in a query string arrives as a space.
    assert.equal(parseUsageTime("2025-01-01T12:00:00 02:00", "start").toISOString(), "2025-01-01T10:00:00.000Z");
  });

  test("bad times are InvalidRequest naming the param", () => {
    for (const bad of ["soon", "2025-02-30", "2025-13-01", "2025-01-01T24:00", "-5", "1e9", "2025/01/01", "", "Jan 1 2025"]) {
      assert.throws(
        () => parseUsageTime(bad, "end"),
        (error: unknown) => {
          assert.ok(error instanceof InvalidRequest, bad);
          assert.equal(error.param, "end");
          return true;
        },
      );
    }
  });

  test("parseUsageParams: empty values are absent, group_by is checked, end must follow start", () => {
    assert.deepEqual(parseUsageParams({ start: "", end: "", group_by: "" }), {});
    assert.deepEqual(parseUsageParams({ group_by: "day", other: "ignored" }), { groupBy: "day" });
    assert.throws(
      () => parseUsageParams({ group_by: "hour" }),
      (e: unknown) => e instanceof InvalidRequest && e.param === "group_by",
    );
    assert.throws(
      () => parseUsageParams({ start: ["1", "2"] }),
      (e: unknown) => e instanceof InvalidRequest && e.param === "start",
    );
    assert.throws(
      () => parseUsageParams({ start: "2025-01-02", end: "2025-01-01" }),
      (e: unknown) => e instanceof InvalidRequest && e.param === "end",
    );
  });

  test("parseWireUsage keeps every cost exact, even past float precision", () => {
    const text =
      '{"object":"usage","start":null,"end":null,"group_by":"model","totals":{"requests":2,"prompt_tokens":1,"cached_tokens":0,"completion_tokens":1,' +
      '"total_tokens":2,"cost_usd":12345678901234567890.123456789012345678,"by_status":{"completed":2}},' +
      '"data":[{"group":"a \\"cost_usd\\":1 -5","requests":2,"prompt_tokens":1,"cached_tokens":0,"completion_tokens":1,"total_tokens":2,"cost_usd":0.000000001,"by_status":{"completed":2}}]}';
    const report = parseWireUsage(text);
    assert.equal(report.totals.cost_usd, "12345678901234567890.123456789012345678");
    assert.equal(report.groups[0]!.group, 'a "cost_usd":1 -5');
    assert.equal(report.groups[0]!.cost_usd, "0.000000001");
    assert.equal(report.totals.requests, 2);
  });
});
