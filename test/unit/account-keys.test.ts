import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import Fastify, { type FastifyInstance } from "fastify";
import { generateAdminToken } from "../../src/accounts/local-server.js";
import { createKey } from "../../src/accounts/key-store.js";
import { authenticate } from "../../src/accounts/principals.js";
import { installAuth } from "../../src/http/auth.js";
import { installErrorHandlers } from "../../src/http/errors.js";
import { keyEndpoints } from "../../src/api/keys/endpoints.js";
import { registerEndpoints } from "../../src/http/endpoint-routes.js";
import { adminEndpoints } from "../../src/api/admin/endpoints.js";
import { adminRoutes } from "../../src/http/routes/admin.js";
import { createAccountAdmin } from "../../src/accounts/account-admin.js";
import { createUsageReports } from "../../src/billing/usage-reports.js";
import { createAccountKeys } from "../../src/accounts/account-keys.js";
import { forEachDatabase } from "../helpers/databases.js";

/** The service's own auth and error handling, the account-scoped key API and the admin API, on 127.0.0.1. */
forEachDatabase("account-scoped key API (/v1/keys)", ({ db }) => {
  const adminToken = generateAdminToken();
  let app: FastifyInstance;
  let url: string;
  let manager: { id: string; key: string };
  let plain: { id: string; key: string };
  let other: { id: string; key: string };

  const call = async (method: string, path: string, key: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as any };
  };

  before(async () => {
    app = Fastify();
    installErrorHandlers(app);
    installAuth(app, (token) => authenticate(db, token));
    registerEndpoints(app, keyEndpoints(createAccountKeys(db)));
    await app.register(adminRoutes, { endpoints: adminEndpoints(createAccountAdmin(db), createUsageReports(db)), adminToken });
    url = await app.listen({ host: "127.0.0.1", port: 0 });
    manager = await createKey(db, { account: "acme", name: "ops", manageKeys: true });
    plain = await createKey(db, { account: "acme", name: "app" });
    other = await createKey(db, { account: "globex", name: "theirs", manageKeys: true });
  });
  after(async () => {
    await app.close();
  });

  test("a key without the right gets 403 in the OpenAI error shape, and changes nothing", async () => {
    for (const [method, path, body] of [
      ["GET", "/v1/keys"],
      ["POST", "/v1/keys", {}],
      ["DELETE", `/v1/keys/${manager.id}`],
    ] as const) {
      const answer = await call(method, path, plain.key, body);
      assert.equal(answer.status, 403, `${method} ${path}`);
      assert.equal(answer.body.error.type, "permission_error");
      assert.equal(answer.body.error.code, "missing_manage_keys_right");
      assert.match(answer.body.error.message, /manage-keys right/);
    }
    assert.notEqual(await authenticate(db, manager.key), null, "the manager key was not revoked");
  });

  test("a manager lists only its own account's keys, with the right shown and no secrets", async () => {
    const answer = await call("GET", "/v1/keys", manager.key);
    assert.equal(answer.status, 200);
    const ids = answer.body.data.map((k: { id: string }) => k.id).sort();
    assert.deepEqual(ids, [manager.id, plain.id].sort());
    const own = answer.body.data.find((k: { id: string }) => k.id === manager.id);
    assert.equal(own.manage_keys, true);
    assert.equal(answer.body.data.find((k: { id: string }) => k.id === plain.id).manage_keys, false);
    assert.ok(!JSON.stringify(answer.body).includes(manager.key) && !JSON.stringify(answer.body).includes("secret_hash"));
  });

  test("a manager creates a key for its own account, shown once, that works until revoked", async () => {
    const created = await call("POST", "/v1/keys", manager.key, {
      name: "ci",
      rpm_limit: 30,
      budget_usd: "5",
      expires_at: Math.floor(Date.now() / 1000) + 86_400,
    });
    assert.equal(created.status, 201);
    assert.equal(created.body.account, "acme");
    assert.equal(created.body.rpm_limit, 30);
    assert.equal(created.body.budget_usd, "5");
    assert.equal(created.body.manage_keys, false);
    assert.match(created.body.key, /^sk-sy-/);
    const principal = await authenticate(db, created.body.key);
    assert.equal(principal?.accountName, "acme");

    const listed = await call("GET", "/v1/keys", manager.key);
    assert.ok(!JSON.stringify(listed.body).includes(created.body.key), "listings never show the key again");

    const revoked = await call("DELETE", `/v1/keys/${created.body.id}`, manager.key);
    assert.deepEqual(revoked.body, { id: created.body.id, object: "api_key", revoked: true });
    assert.equal(await authenticate(db, created.body.key), null);
  });

  test("another account's key id is a 404, exactly like an unknown id, and stays valid", async () => {
    const foreign = await call("DELETE", `/v1/keys/${other.id}`, manager.key);
    const unknown = await call("DELETE", "/v1/keys/key_doesnotexist", manager.key);
    assert.equal(foreign.status, 404);
    assert.equal(unknown.status, 404);
    assert.equal(foreign.body.error.message.replace(other.id, "X"), unknown.body.error.message.replace("key_doesnotexist", "X"));
    assert.notEqual(await authenticate(db, other.key), null);
  });

  test("the body cannot name another account; unknown fields are a 400 naming them", async () => {
    const answer = await call("POST", "/v1/keys", manager.key, { account: "globex", name: "sneaky" });
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error.type, "invalid_request_error");
    const bad = await call("POST", "/v1/keys", manager.key, { rpm_limit: -1 });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, "rpm_limit");
  });

  test("a model-restricted manager cannot grant models it cannot use; its keys inherit its list", async () => {
    const narrow = await createKey(db, { account: "acme", allowedModels: ["m1"], manageKeys: true });
    const wider = await call("POST", "/v1/keys", narrow.key, { allowed_models: ["m1", "m2"] });
    assert.equal(wider.status, 403);
    assert.equal(wider.body.error.code, "exceeds_own_rights");
    assert.equal(wider.body.error.param, "allowed_models");
    assert.match(wider.body.error.message, /m2/);
    const inherited = await call("POST", "/v1/keys", narrow.key, {});
    assert.equal(inherited.status, 201);
    assert.deepEqual(inherited.body.allowed_models, ["m1"]);
  });

  test("a limited manager's new keys inherit its limits, expiry and what is left of its budget", async () => {
    const expiresAt = new Date(Date.now() + 86_400_000);
    const limited = await createKey(db, {
      account: "acme",
      manageKeys: true,
      budgetUsd: "0.5",
      requestsPerMinute: 5,
      tokensPerMinute: 900,
      expiresAt,
    });
    await db.query("UPDATE api_keys SET spent_usd = 0.2 WHERE id = $1", [limited.id]);
    const child = await call("POST", "/v1/keys", limited.key, {});
    assert.equal(child.status, 201);
    assert.deepEqual(
      [child.body.budget_usd, child.body.rpm_limit, child.body.tpm_limit, child.body.expires_at],
      ["0.3", 5, 900, Math.floor(expiresAt.getTime() / 1000)],
    );
    assert.equal(child.body.manage_keys, false, "the right itself is granted only when asked for");
    const tooMuch = await call("POST", "/v1/keys", limited.key, { budget_usd: "0.31" });
    assert.equal(tooMuch.status, 403);
    assert.equal(tooMuch.body.error.param, "budget_usd");
    assert.match(tooMuch.body.error.message, /\$0\.3\b/);
    const smaller = await call("POST", "/v1/keys", limited.key, { budget_usd: "0.1", rpm_limit: 2, manage_keys: true });
    assert.equal(smaller.status, 201);
    // Both keys it made are within its rights, and so is the key itself.
    for (const id of [child.body.id, smaller.body.id, limited.id])
      assert.equal((await call("DELETE", `/v1/keys/${id}`, limited.key)).status, 200, id);
  });

  test("a manager cannot revoke a key of its account with more rights than its own", async () => {
    const small = await createKey(db, { account: "acme", manageKeys: true, budgetUsd: "1" });
    const answer = await call("DELETE", `/v1/keys/${manager.id}`, small.key);
    assert.equal(answer.status, 403);
    assert.equal(answer.body.error.type, "permission_error");
    assert.equal(answer.body.error.code, "exceeds_own_rights");
    assert.equal(answer.body.error.param, "budget_usd");
    assert.notEqual(await authenticate(db, manager.key), null, "the unrestricted manager still works");
    // The admin API has no such bound.
    const byAdmin = await fetch(`${url}/admin/v1/keys/${small.id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${adminToken}` },
    });
    assert.equal(byAdmin.status, 200);
  });

  test("the admin API creates keys with the right and shows it", async () => {
    const response = await fetch(`${url}/admin/v1/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ account: "initech", manage_keys: true }),
    });
    const created = (await response.json()) as { key: string; manage_keys: boolean };
    assert.equal(response.status, 201);
    assert.equal(created.manage_keys, true);
    const listed = await call("GET", "/v1/keys", created.key);
    assert.equal(listed.status, 200);
    assert.equal(listed.body.data.length, 1);
  });
});
