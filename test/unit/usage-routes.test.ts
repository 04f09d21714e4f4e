import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import Fastify, { type FastifyInstance } from "fastify";
import { generateAdminToken, removeServerFile, writeServerFile } from "../../src/accounts/local-server.js";
import { createKey, findAccount, revokeKey } from "../../src/accounts/key-store.js";
import { authenticate } from "../../src/accounts/principals.js";
import { createUsageLedger } from "../../src/billing/ledger.js";
import { usageCommand } from "../../src/cli/usage.js";
import { installAuth, type Authenticate } from "../../src/http/auth.js";
import { installErrorHandlers } from "../../src/http/errors.js";
import { adminEndpoints } from "../../src/api/admin/endpoints.js";
import { adminRoutes } from "../../src/http/routes/admin.js";
import { createAccountAdmin } from "../../src/accounts/account-admin.js";
import { createUsageReports } from "../../src/billing/usage-reports.js";
import { usageEndpoints } from "../../src/api/usage/endpoints.js";
import { registerEndpoints } from "../../src/http/endpoint-routes.js";
import type { UsageRecord } from "../../src/billing/ports.js";
import type { Database } from "../../src/storage/database.js";
import { openDatabase } from "../../src/storage/open.js";
import { forEachDatabase } from "../helpers/databases.js";
import { usage as completedUsage } from "../helpers/usage.js";
import { migratedDataDir } from "../helpers/databases.js";

/** These rows carry cached tokens and no cost, so the sums below isolate the token arithmetic. */
const usage = (accountId: string, keyId: string, overrides: Partial<UsageRecord> = {}) =>
  completedUsage(accountId, keyId, { cachedTokens: 2, costUsd: "0", queueMs: 0, ttftMs: 10, durationMs: 50, ...overrides });

/** The real key check from the store. */
function realAuthenticate(db: Database): Authenticate {
  return (token) => authenticate(db, token);
}

/** The service's own auth and error handling, the usage route, and the admin API, on 127.0.0.1. */
async function startUsageServer(db: Database, adminToken: string): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify();
  installErrorHandlers(app);
  installAuth(app, realAuthenticate(db));
  registerEndpoints(app, usageEndpoints(createUsageReports(db)));
  await app.register(adminRoutes, { endpoints: adminEndpoints(createAccountAdmin(db), createUsageReports(db)), adminToken });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, url };
}

/** Runs `switchyard usage ...args` in-process and returns its stdout. */
async function runUsage(...args: string[]): Promise<string> {
  let output = "";
  await usageCommand({ stdout: { write: (text: string) => (output += text) } }).parseAsync(args, { from: "user" });
  return output;
}

forEachDatabase("usage routes", ({ db }) => {
  const adminToken = generateAdminToken();
  let app: FastifyInstance;
  let baseUrl: string;
  let keyA: { id: string; key: string };
  let keyA2: { id: string; key: string };
  let keyB: { id: string; key: string };
  let revoked: { id: string; key: string };

  before(async () => {
    ({ app, url: baseUrl } = await startUsageServer(db, adminToken));
    keyA = await createKey(db, { account: "alpha" });
    keyA2 = await createKey(db, { account: "alpha" });
    keyB = await createKey(db, { account: "bravo" });
    revoked = await createKey(db, { account: "bravo" });
    const alpha = (await findAccount(db, "alpha"))!.id;
    const bravo = (await findAccount(db, "bravo"))!.id;

    const ledger = createUsageLedger(db);
    const rows: Array<[UsageRecord, string]> = [
      [usage(alpha, keyA.id, { model: "m/one", costUsd: "0.000000001" }), "2025-03-01T08:00:00Z"],
      [usage(alpha, keyA.id, { model: "m/two", costUsd: "0.1", status: "failed", errorCode: "internal_error" }), "2025-03-01T20:00:00Z"],
      [usage(alpha, keyA2.id, { model: "m/one", costUsd: "0.2" }), "2025-03-02T08:00:00Z"],
      [usage(bravo, keyB.id, { model: "m/secret", promptTokens: 1000, costUsd: "7.5" }), "2025-03-01T09:00:00Z"],
    ];
    for (const [record, at] of rows) {
      await ledger.record(record);
      await db.query("UPDATE usage_records SET created_at = $2::timestamptz WHERE request_id = $1", [record.requestId, at]);
    }
    await revokeKey(db, revoked.id);
  });
  after(async () => {
    await app.close();
  });

  const get = async (path: string, token: string | null) => {
    const headers: Record<string, string> = {};
    if (token !== null) headers.authorization = `Bearer ${token}`;
    const response = await fetch(baseUrl + path, { headers });
    const text = await response.text();
    return { status: response.status, text, body: JSON.parse(text) as any, contentType: response.headers.get("content-type") };
  };

  test("each key sees exactly its own account's usage, with exact cost numbers", async () => {
    const a = await get("/v1/usage", keyA.key);
    assert.equal(a.status, 200);
    assert.match(a.contentType ?? "", /^application\/json/);
    assert.equal(a.body.object, "usage");
    assert.equal(a.body.start, null);
    assert.equal(a.body.end, null);
    assert.equal(a.body.group_by, null);
    assert.deepEqual(a.body.data, []);
    assert.equal(a.body.totals.requests, 3);
    assert.equal(a.body.totals.prompt_tokens, 30);
    assert.equal(a.body.totals.cached_tokens, 6);
    assert.equal(a.body.totals.completion_tokens, 15);
    assert.equal(a.body.totals.total_tokens, 45);
    assert.deepEqual(a.body.totals.by_status, {
      completed: 2,
      cancelled: 0,
      failed: 1,
      rejected: 0,
      expired: 0,
      in_flight: 0,
      interrupted: 0,
    });
    // The exact decimal is a bare JSON number (not a string, not 0.30000000100000004, no exponent).
    assert.match(a.text, /"cost_usd":0\.300000001[,}]/);
    assert.ok(!/e-?\d/i.test(a.text.replace(/"[^"]*"/g, "")), "no exponent anywhere outside strings");
    assert.ok(!a.text.includes("m/secret") && !a.text.includes(keyB.id));

    // The account's other key sees the same account-wide numbers.
    const a2 = await get("/v1/usage", keyA2.key);
    assert.equal(a2.text, a.text);

    const b = await get("/v1/usage?group_by=model", keyB.key);
    assert.equal(b.status, 200);
    assert.equal(b.body.totals.requests, 1);
    assert.match(b.text, /"cost_usd":7\.5[,}]/);
    assert.deepEqual(
      b.body.data.map((g: { group: string }) => g.group),
      ["m/secret"],
    );
    assert.ok(!b.text.includes("m/one") && !b.text.includes(keyA.id));
  });

  test("group_by model, day and key", async () => {
    const byModel = await get("/v1/usage?group_by=model", keyA.key);
    assert.equal(byModel.body.group_by, "model");
    assert.deepEqual(
      byModel.body.data.map((g: any) => [g.group, g.requests, g.by_status.failed]),
      [
        ["m/one", 2, 0],
        ["m/two", 1, 1],
      ],
    );
    assert.match(byModel.text, /"group":"m\/one","requests":2,.*?"cost_usd":0\.200000001[,}]/);
    assert.match(byModel.text, /"group":"m\/two",.*?"cost_usd":0\.1[,}]/);

    const byDay = await get("/v1/usage?group_by=day", keyA.key);
    assert.deepEqual(
      byDay.body.data.map((g: any) => [g.group, g.requests]),
      [
        ["2025-03-01", 2],
        ["2025-03-02", 1],
      ],
    );
    assert.match(byDay.text, /"group":"2025-03-01",.*?"cost_usd":0\.100000001[,}]/);

    const byKey = await get("/v1/usage?group_by=key", keyA.key);
    assert.deepEqual(Object.fromEntries(byKey.body.data.map((g: any) => [g.group, g.requests])), { [keyA.id]: 2, [keyA2.id]: 1 });
  });

  test("start and end filter (ISO or Unix seconds; start inclusive, end exclusive)", async () => {
    const iso = await get("/v1/usage?start=2025-03-01T08:00:00Z&end=2025-03-02&group_by=model", keyA.key);
    assert.equal(iso.status, 200);
    assert.equal(iso.body.start, Date.parse("2025-03-01T08:00:00Z") / 1000);
    assert.equal(iso.body.end, Date.parse("2025-03-02T00:00:00Z") / 1000);
    assert.equal(iso.body.totals.requests, 2);
    assert.match(iso.text, /"totals":\{[^}]*"cost_usd":0\.100000001[,}]/);

    const unix = await get(`/v1/usage?start=${Date.parse("2025-03-01T20:00:00Z") / 1000}`, keyA.key);
    assert.equal(unix.body.totals.requests, 2);
    assert.match(unix.text, /"totals":\{[^}]*"cost_usd":0\.3[,}]/);

    // 10:00+02:00 is the 08:00Z of the first row; end is exclusive, so one second later takes it in.
    const atFirst = await get(`/v1/usage?end=${encodeURIComponent("2025-03-01T10:00:00+02:00")}`, keyA.key);
    assert.equal(atFirst.body.totals.requests, 0);
    const afterFirst = await get(`/v1/usage?end=${encodeURIComponent("2025-03-01T10:00:01+02:00")}`, keyA.key);
    assert.equal(afterFirst.body.totals.requests, 1);
    assert.match(afterFirst.text, /"cost_usd":0\.000000001[,}]/);
    const empty = await get("/v1/usage?start=&end=&group_by=", keyA.key);
    assert.equal(empty.body.totals.requests, 3);
  });

  test("bad parameters are 400s in the OpenAI error shape, naming the param", async () => {
    for (const [query, param] of [
      ["start=yesterday", "start"],
      ["end=2025-02-30", "end"],
      ["group_by=hour", "group_by"],
      ["start=2025-03-02&end=2025-03-01", "end"],
      ["start=1&start=2", "start"],
    ] as const) {
      const { status, body } = await get(`/v1/usage?${query}`, keyA.key);
      assert.equal(status, 400, query);
      assert.deepEqual(Object.keys(body), ["error"]);
      assert.equal(body.error.type, "invalid_request_error");
      assert.equal(body.error.param, param, query);
      assert.equal(typeof body.error.message, "string");
      assert.ok("code" in body.error);
    }
  });

  test("no key, an unknown key or a revoked key is a 401", async () => {
    for (const token of [null, "sk-sy-nope", revoked.key]) {
      const { status, body } = await get("/v1/usage", token);
      assert.equal(status, 401);
      assert.equal(body.error.type, "authentication_error");
    }
  });

  test("GET /admin/v1/usage reports any account by name, behind the admin token", async () => {
    const ok = await get("/admin/v1/usage?account=bravo&group_by=key", adminToken);
    assert.equal(ok.status, 200);
    assert.equal(ok.body.account, "bravo");
    assert.equal(ok.body.totals.requests, 1);
    assert.match(ok.text, /"cost_usd":7\.5[,}]/);
    assert.deepEqual(
      ok.body.data.map((g: any) => g.group),
      [keyB.id],
    );

    const alpha = await get("/admin/v1/usage?account=alpha&end=2025-03-02", adminToken);
    assert.match(alpha.text, /"totals":\{[^}]*"cost_usd":0\.100000001[,}]/);

    assert.equal((await get("/admin/v1/usage?account=bravo", keyB.key)).status, 401);
    assert.equal((await get("/admin/v1/usage?account=bravo", null)).status, 401);
    const missing = await get("/admin/v1/usage", adminToken);
    assert.equal(missing.status, 400);
    assert.equal(missing.body.error.param, "account");
    assert.equal((await get("/admin/v1/usage?account=nobody", adminToken)).status, 404);
    const bad = await get("/admin/v1/usage?account=alpha&group_by=week", adminToken);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, "group_by");
  });

  describe("usage CLI with a live server on the data dir (goes through the admin API)", () => {
    let dataDir: string;
    beforeEach(async () => {
      dataDir = await mkdtemp(join(tmpdir(), "switchyard-usage-cli-"));
      writeServerFile(dataDir, { url: baseUrl, adminToken });
    });
    afterEach(async () => {
      removeServerFile(dataDir);
      await rm(dataDir, { recursive: true, force: true });
    });

    test("table and JSON, exact costs", async () => {
      const table = await runUsage("--account", "alpha", "--group-by", "model", "--data-dir", dataDir);
      assert.match(table, /Usage for account 'alpha' \(all time\)/);
      assert.match(table, /MODEL\s+REQUESTS\s+PROMPT\s+CACHED\s+COMPLETION\s+TOTAL TOKENS\s+COST \(USD\)/);
      assert.match(table, /m\/one\s+2\s+20\s+4\s+10\s+30\s+0\.200000001\n/);
      assert.match(table, /TOTAL\s+3\s+30\s+6\s+15\s+45\s+0\.300000001\n/);
      assert.match(table, /By status: completed 2, failed 1/);

      const json = await runUsage("--account", "alpha", "--start", "2025-03-01", "--end", "1740873600", "--json", "--data-dir", dataDir);
      assert.match(json, /"cost_usd": 0\.100000001[,\n]/);
      const parsed = JSON.parse(json);
      assert.equal(parsed.account, "alpha");
      assert.equal(parsed.start, Date.parse("2025-03-01") / 1000);
      assert.equal(parsed.end, 1740873600);
      assert.equal(parsed.totals.requests, 2);
    });

    test("an unknown account is the server's 404", async () => {
      await assert.rejects(runUsage("--account", "nobody", "--data-dir", dataDir), (error: unknown) => {
        assert.equal((error as { status?: number }).status, 404);
        assert.match((error as Error).message, /No account named 'nobody'/);
        return true;
      });
    });
  });
});

describe("usage CLI without a server (opens the database itself)", () => {
  // These tests exercise the embedded database; a PostgreSQL URL in the environment would bypass it.
  const savedDatabaseUrl = process.env.SWITCHYARD_DATABASE_URL;
  let dataDir: string;
  before(async () => {
    delete process.env.SWITCHYARD_DATABASE_URL;
    dataDir = await migratedDataDir("switchyard-usage-cli-");
    const db = await openDatabase({ dataDir });
    try {
      const key = await createKey(db, { account: "solo" });
      const accountId = (await findAccount(db, "solo"))!.id;
      const ledger = createUsageLedger(db);
      for (const costUsd of ["0.000000001", "0.1", "0.2"]) await ledger.record(usage(accountId, key.id, { costUsd }));
      await createKey(db, { account: "empty" });
    } finally {
      await db.close();
    }
  });
  after(async () => {
    if (savedDatabaseUrl !== undefined) process.env.SWITCHYARD_DATABASE_URL = savedDatabaseUrl;
    await rm(dataDir, { recursive: true, force: true });
  });

  test("prints totals with the exact cost; groups by day", async () => {
    const table = await runUsage("--account", "solo", "--data-dir", dataDir);
    assert.match(table, /TOTAL\s+3\s+30\s+6\s+15\s+45\s+0\.300000001\n/);
    const today = new Date().toISOString().slice(0, 10);
    const byDay = await runUsage("--account", "solo", "--group-by", "day", "--data-dir", dataDir);
    assert.match(byDay, new RegExp(`DAY \\(UTC\\)[^\\n]*\\n${today}\\s+3\\s`));
    const json = await runUsage("--account", "solo", "--json", "--data-dir", dataDir);
    assert.match(json, /"cost_usd": 0\.300000001/);
  });

  test("an account without usage; an unknown account; bad flags", async () => {
    assert.match(
      await runUsage("--account", "empty", "--data-dir", dataDir),
      /TOTAL\s+0\s+0\s+0\s+0\s+0\s+0\n[\s\S]*By status: no requests/,
    );
    await assert.rejects(runUsage("--account", "nobody", "--data-dir", dataDir), /No account named 'nobody'/);
    const quiet = () =>
      usageCommand({ stdout: { write: () => true } })
        .exitOverride()
        .configureOutput({ writeErr: () => undefined });
    await assert.rejects(
      quiet().parseAsync(["--account", "solo", "--start", "soon", "--data-dir", dataDir], { from: "user" }),
      /Expected Unix seconds or an ISO 8601/,
    );
    await assert.rejects(
      quiet().parseAsync(["--account", "solo", "--group-by", "hour", "--data-dir", dataDir], { from: "user" }),
      /Allowed choices are model, day, key/,
    );
    await assert.rejects(
      quiet().parseAsync(["--account", "solo", "--start", "2025-01-02", "--end", "2025-01-01", "--data-dir", dataDir], { from: "user" }),
      /--end must be later than --start/,
    );
  });
});
