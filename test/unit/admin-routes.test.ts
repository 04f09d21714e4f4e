import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { authenticate } from "../../src/accounts/principals.js";
import { generateAdminToken } from "../../src/accounts/local-server.js";
import { startAdminServer } from "../helpers/admin-server.js";
import { forEachDatabase } from "../helpers/databases.js";

forEachDatabase("admin routes", ({ db }) => {
  const adminToken = generateAdminToken();
  let app: FastifyInstance;
  let baseUrl: string;

  before(async () => {
    ({ app, url: baseUrl } = await startAdminServer(db, adminToken));
  });
  after(async () => {
    await app.close();
  });

  const call = async (method: string, path: string, body?: unknown, token: string | null = adminToken) => {
    const headers: Record<string, string> = {};
    if (token !== null) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as any };
  };

  test("POST /admin/v1/keys creates a key that authenticates", async () => {
    const expiresAt = Math.floor(Date.now() / 1000) + 3600;
    const { status, body } = await call("POST", "/admin/v1/keys", {
      account: "acme",
      name: "ci",
      expires_at: expiresAt,
      allowed_models: ["qwen"],
    });
    assert.equal(status, 201);
    assert.equal(body.object, "api_key");
    assert.match(body.id, /^key_/);
    assert.match(body.key, /^sk-sy-/);
    assert.ok(body.key.startsWith(body.prefix));
    assert.equal(body.account, "acme");
    assert.equal(body.name, "ci");
    assert.equal(body.expires_at, expiresAt);
    assert.deepEqual(body.allowed_models, ["qwen"]);
    assert.equal(typeof body.created_at, "number");
    assert.equal((await authenticate(db, body.key))?.accountName, "acme");
  });

  test("expires_at may be an ISO date; a past or bad one is a 400", async () => {
    const iso = new Date(Date.now() + 86_400_000).toISOString();
    const ok = await call("POST", "/admin/v1/keys", { account: "acme", expires_at: iso });
    assert.equal(ok.status, 201);
    assert.equal(ok.body.expires_at, Math.floor(Date.parse(iso) / 1000));
    const past = await call("POST", "/admin/v1/keys", { account: "acme", expires_at: "2000-01-01T00:00:00Z" });
    assert.equal(past.status, 400);
    assert.equal(past.body.error.param, "expires_at");
    const bad = await call("POST", "/admin/v1/keys", { account: "acme", expires_at: "soon" });
    assert.equal(bad.status, 400);
  });

  test("a NUL byte anywhere it would reach the database is a 4xx, never a 500", async () => {
    assert.equal((await call("POST", "/admin/v1/keys", { account: "acme", allowed_models: ["a\u0000b"] })).status, 400);
    assert.equal((await call("POST", "/admin/v1/keys", { account: "ac\u0000me" })).status, 400);
    assert.equal((await call("GET", "/admin/v1/keys?account=ac%00me")).status, 200);
    assert.equal((await call("GET", "/admin/v1/usage?account=ac%00me")).status, 404);
    assert.equal((await call("POST", "/admin/v1/accounts/ac%00me/disable")).status, 404);
    assert.equal((await call("PATCH", "/admin/v1/keys/key%00x", { rpm_limit: 5 })).status, 404);
    assert.equal((await call("DELETE", "/admin/v1/keys/key%00x")).status, 404);
  });

  test("a body without an account is a 400 naming the param", async () => {
    const { status, body } = await call("POST", "/admin/v1/keys", { name: "orphan" });
    assert.equal(status, 400);
    assert.equal(body.error.type, "invalid_request_error");
    assert.equal(body.error.param, "account");
  });

  test("GET /admin/v1/keys lists keys without secrets, filtered by account", async () => {
    const created = (await call("POST", "/admin/v1/keys", { account: "listed" })).body;
    const { status, body } = await call("GET", "/admin/v1/keys?account=listed");
    assert.equal(status, 200);
    assert.equal(body.object, "list");
    assert.deepEqual(
      body.data.map((key: { id: string }) => key.id),
      [created.id],
    );
    assert.equal(body.data[0].key, undefined);
    assert.ok(!JSON.stringify(body).includes(created.key));
    const all = await call("GET", "/admin/v1/keys");
    assert.ok(all.body.data.length > 1);
  });

  test("keys take rpm_limit, tpm_limit and budget_usd at creation and PATCH changes them", async () => {
    const created = await call("POST", "/admin/v1/keys", { account: "limited", rpm_limit: 60, tpm_limit: 1000, budget_usd: "12.50" });
    assert.equal(created.status, 201);
    assert.equal(created.body.rpm_limit, 60);
    assert.equal(created.body.tpm_limit, 1000);
    assert.equal(created.body.budget_usd, "12.5");
    assert.equal(created.body.spent_usd, "0");
    assert.deepEqual((await authenticate(db, created.body.key))?.limits, {
      requestsPerMinute: 60,
      tokensPerMinute: 1000,
      budgetUsd: "12.5",
    });

    const plain = (await call("POST", "/admin/v1/keys", { account: "limited", budget_usd: 3.25 })).body;
    assert.equal(plain.budget_usd, "3.25", "a JSON number is taken as its text");
    assert.equal(plain.rpm_limit, null);

    const patched = await call("PATCH", `/admin/v1/keys/${created.body.id}`, { rpm_limit: null, budget_usd: "100" });
    assert.equal(patched.status, 200);
    assert.equal(patched.body.id, created.body.id);
    assert.equal(patched.body.key, undefined);
    assert.deepEqual([patched.body.rpm_limit, patched.body.tpm_limit, patched.body.budget_usd], [null, 1000, "100"]);
    const listed = (await call("GET", "/admin/v1/keys?account=limited")).body.data.find(
      (key: { id: string }) => key.id === created.body.id,
    );
    assert.equal(listed.budget_usd, "100");

    for (const [body, param] of [
      [{ rpm_limit: 0 }, "rpm_limit"],
      [{ tpm_limit: 1.5 }, "tpm_limit"],
      [{ budget_usd: "-1" }, "budget_usd"],
      [{ budget_usd: "lots" }, "budget_usd"],
      [{ rpm_limit: "60" }, "rpm_limit"],
    ] as const) {
      const bad = await call("PATCH", `/admin/v1/keys/${created.body.id}`, body);
      assert.equal(bad.status, 400, JSON.stringify(body));
      assert.equal(bad.body.error.param, param);
      assert.equal((await call("POST", "/admin/v1/keys", { account: "limited", ...body })).status, 400);
    }
    assert.equal((await call("PATCH", `/admin/v1/keys/${created.body.id}`, { budget: "5" })).status, 400, "unknown fields are refused");
    const missing = await call("PATCH", "/admin/v1/keys/key_nope", { rpm_limit: 5 });
    assert.equal(missing.status, 404);
  });

  test("DELETE /admin/v1/keys/:id revokes; an unknown id is a 404", async () => {
    const created = (await call("POST", "/admin/v1/keys", { account: "revoked" })).body;
    const { status, body } = await call("DELETE", `/admin/v1/keys/${created.id}`);
    assert.equal(status, 200);
    assert.deepEqual(body, { id: created.id, object: "api_key", revoked: true });
    assert.equal(await authenticate(db, created.key), null);
    const listed = (await call("GET", "/admin/v1/keys?account=revoked")).body.data[0];
    assert.equal(typeof listed.revoked_at, "number");
    const missing = await call("DELETE", "/admin/v1/keys/key_nope");
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.type, "not_found_error");
  });

  test("accounts can be disabled and enabled; an unknown account is a 404", async () => {
    const created = (await call("POST", "/admin/v1/keys", { account: "toggled" })).body;
    const disabled = await call("POST", "/admin/v1/accounts/toggled/disable");
    assert.equal(disabled.status, 200);
    assert.equal(disabled.body.object, "account");
    assert.equal(disabled.body.disabled, true);
    assert.equal(await authenticate(db, created.key), null);
    const enabled = await call("POST", "/admin/v1/accounts/toggled/enable");
    assert.equal(enabled.body.disabled, false);
    assert.ok(await authenticate(db, created.key));
    assert.equal((await call("POST", "/admin/v1/accounts/ghost/disable")).status, 404);
  });

  test("a wrong or missing admin token is a 401, and an API key is not an admin token", async () => {
    for (const token of ["wrong", null, `${adminToken}x`, ""]) {
      const { status, body } = await call("GET", "/admin/v1/keys", undefined, token);
      assert.equal(status, 401);
      assert.equal(body.error.type, "authentication_error");
    }
    const apiKey = (await call("POST", "/admin/v1/keys", { account: "acme" })).body.key;
    assert.equal((await call("POST", "/admin/v1/keys", { account: "sneaky" }, apiKey)).status, 401);
    assert.equal((await call("DELETE", "/admin/v1/keys/key_x", undefined, "wrong")).status, 401);
  });
});
