import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { compareMoney } from "../../src/billing/cost.js";
import { Dec, toText } from "../../src/billing/decimal.js";
import { parseWireUsageReport as parseWireUsage } from "../../src/protocol/usage.js";
import { SMOLLM2, startServer, type RunningServer } from "../helpers/server.js";

const ADMIN_KEY = `sy-admin-tenant-guards-${"k".repeat(24)}`;
const MAX_FAILURES = 5;
const LOCKOUT_S = 3;

/**
 * Issue 20, items 3, 6 and 12, each sent exactly as the hostile tenant sent it, against the real
 * server with the real model.
 */
describe("tenants cannot hurt each other: keys, spend and the admin key", () => {
  let server: RunningServer;

  const call = async (method: string, path: string, key: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(server.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: response.status, headers: response.headers, body: (await response.json()) as any };
  };
  const admin = (method: string, path: string, body?: unknown) => call(method, path, ADMIN_KEY, body);

  before(async () => {
    server = await startServer({
      env: {
        SWITCHYARD_ADMIN_KEY: ADMIN_KEY,
        SWITCHYARD_ADMIN_MAX_FAILURES: String(MAX_FAILURES),
        SWITCHYARD_ADMIN_LOCKOUT_S: String(LOCKOUT_S),
      },
    });
  });
  after(async () => {
    await server?.stop();
  });

  test("item 3: a small manage-keys key cannot mint a bigger key nor revoke the account's unrestricted one", async () => {
    const owner = (await admin("POST", "/admin/v1/keys", { account: "victim", name: "owner", manage_keys: true })).body;
    const dayFromNow = Math.floor(Date.now() / 1000) + 86_400;
    const small = await admin("POST", "/admin/v1/keys", {
      account: "victim",
      name: "leaked",
      manage_keys: true,
      budget_usd: "0.001",
      rpm_limit: 5,
      expires_at: dayFromNow,
    });
    assert.equal(small.status, 201);
    const attacker = small.body.key as string;

    const grab = await call("POST", "/v1/keys", attacker, {
      manage_keys: true,
      budget_usd: "1000000",
      rpm_limit: 100000,
      expires_at: "2099-01-01T00:00:00Z",
    });
    assert.equal(grab.status, 403);
    assert.deepEqual(Object.keys(grab.body.error).sort(), ["code", "message", "param", "type"]);
    assert.equal(grab.body.error.type, "permission_error");
    assert.equal(grab.body.error.code, "exceeds_own_rights");
    assert.equal(grab.body.error.param, "budget_usd");
    // Each oversized field on its own is refused too, naming that field.
    for (const [field, value] of [
      ["budget_usd", "1000000"],
      ["rpm_limit", 100000],
      ["expires_at", "2099-01-01T00:00:00Z"],
    ] as const) {
      const one = await call("POST", "/v1/keys", attacker, { [field]: value });
      assert.equal(one.status, 403, field);
      assert.equal(one.body.error.param, field);
    }

    const revoke = await call("DELETE", `/v1/keys/${owner.id}`, attacker);
    assert.equal(revoke.status, 403);
    assert.equal(revoke.body.error.type, "permission_error");
    assert.equal(revoke.body.error.code, "exceeds_own_rights");

    // Nothing changed: the owner's key works and is not revoked, and no key was added.
    const listed = await call("GET", "/v1/keys", owner.key);
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body.data.map((k: { name: string }) => k.name).sort(), ["leaked", "owner"]);
    assert.equal(listed.body.data.find((k: { id: string }) => k.id === owner.id).revoked_at, null);

    // What it may do: a key within its own rights, which gets at most them.
    const within = await call("POST", "/v1/keys", attacker, { manage_keys: true });
    assert.equal(within.status, 201);
    assert.deepEqual([within.body.budget_usd, within.body.rpm_limit, within.body.expires_at], ["0.001", 5, dayFromNow]);
  });

  test("item 6: a key without a budget counts its spend, and a budget set below it stops the key at once", async () => {
    const created = (await admin("POST", "/admin/v1/keys", { account: "spender" })).body;
    assert.equal(created.budget_usd, null);
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: created.key, maxRetries: 0 });
    // A long prompt, so this request costs far more than the small one's worst case below.
    const long = `Summarise this list: ${Array.from({ length: 150 }, (_, i) => `item${i}`).join(", ")}`;
    const first = await client.chat.completions.create({
      model: SMOLLM2,
      messages: [{ role: "user", content: long }],
      max_tokens: 16,
      temperature: 0,
    });
    assert.ok(first.usage && first.usage.prompt_tokens > 300);

    // Read exactly: the usage report's money is JSON numbers with every digit kept.
    const ledger = parseWireUsage(
      await (await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${created.key}` } })).text(),
    );
    const spent = (await admin("GET", "/admin/v1/keys?account=spender")).body.data[0].spent_usd as string;
    assert.equal(compareMoney(spent, "0"), 1, "spend is counted without a budget");
    assert.equal(compareMoney(spent, ledger.totals.cost_usd), 0, `spent_usd ${spent} is the ledger's cost ${ledger.totals.cost_usd}`);

    // Half of what it spent: room for the small request's worst case, had the spend not been counted.
    const half = (await admin("PATCH", `/admin/v1/keys/${created.id}`, { budget_usd: toText(Dec(spent).div(Dec("2"))) })).body;
    assert.equal(half.spent_usd, spent);
    const refused = await client.chat.completions
      .create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 1 })
      .catch((error: unknown) => error);
    assert.ok(refused instanceof OpenAI.APIError, String(refused));
    assert.equal(refused.status, 402);
    assert.equal((refused.error as { code?: string }).code, "insufficient_quota");
  });

  test("item 12: a burst of wrong admin keys is locked out with 429 and Retry-After, the right key too, until the lockout ends", async () => {
    assert.equal((await admin("GET", "/admin/v1/keys?account=victim")).status, 200);
    for (let i = 0; i < MAX_FAILURES; i++) {
      assert.equal((await call("GET", "/admin/v1/keys", `${ADMIN_KEY.slice(0, -1)}${i}`)).status, 401, `guess ${i}`);
    }
    const throttled = await call("GET", "/admin/v1/keys", "one-more-guess");
    assert.equal(throttled.status, 429);
    assert.equal(throttled.body.error.type, "rate_limit_error");
    assert.equal(throttled.body.error.code, "admin_auth_throttled");
    const retryAfter = Number(throttled.headers.get("retry-after"));
    assert.ok(retryAfter >= 1 && retryAfter <= LOCKOUT_S, `Retry-After ${retryAfter}`);
    // Locked out means no more guesses at all: the right key is not even looked at.
    assert.equal((await admin("GET", "/admin/v1/keys?account=victim")).status, 429);
    // Account API keys are not the admin key's business: they keep working.
    assert.equal((await call("GET", "/v1/compat/models", server.key)).status, 200);

    await sleep(LOCKOUT_S * 1000 + 200);
    assert.equal((await admin("GET", "/admin/v1/keys?account=victim")).status, 200, "the lockout ends by itself");
  });
});
