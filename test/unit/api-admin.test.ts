/**
 * The admin endpoints as plain functions (api/admin/endpoints.ts): `run` with no caller (the admin
 * key names no account) over the real account admin and usage reports on an in-process database,
 * no Fastify, socket or model. The admin key's check and its throttle are the HTTP scope's
 * (http/routes/admin.ts), tested through a server in admin-routes.test.ts.
 */
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { after, before, describe, test } from "node:test";
import { createAccountAdmin } from "../../src/accounts/account-admin.js";
import { authenticate } from "../../src/accounts/principals.js";
import { adminEndpoints } from "../../src/api/admin/endpoints.js";
import type { AdminEndpoint, EndpointAnswer, EndpointInput } from "../../src/api/endpoint.js";
import { ENDPOINT_SPECS } from "../../src/api/registry.js";
import { createUsageReports } from "../../src/billing/usage-reports.js";
import { ServiceError } from "../../src/errors.js";
import { createKeyBody, patchKeyBody } from "../../src/protocol/key-request.js";
import type { Database } from "../../src/storage/database.js";
import { openDatabase } from "../../src/storage/open.js";
import { migratedDataDir } from "../helpers/databases.js";

/** The answer's JSON, whichever way the endpoint wrote it. */
const value = (answer: EndpointAnswer): any => {
  if (answer.type === "json") return answer.value;
  assert.equal(answer.type, "json-text");
  return JSON.parse((answer as { text: string }).text);
};
const refusal = (status: number) => (error: unknown) => error instanceof ServiceError && error.status === status;

describe("admin endpoints as plain functions", () => {
  let dataDir: string;
  let db: Database;
  let endpoints: AdminEndpoint[];
  const byId = (id: string) => endpoints.find((e) => e.id === id)!;
  const call = (id: string, parts: Partial<EndpointInput<any, any, any>> = {}) =>
    byId(id).run(null, { params: {}, query: {}, body: undefined, ...parts });

  before(async () => {
    dataDir = await migratedDataDir("switchyard-api-admin-");
    db = await openDatabase({ dataDir });
    endpoints = adminEndpoints(createAccountAdmin(db), createUsageReports(db));
  });
  after(async () => {
    await db.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  test("declared in the registry, every one behind the admin key", () => {
    assert.deepEqual(
      endpoints.map((e) => e.id),
      ENDPOINT_SPECS.admin.map((s) => s.id),
    );
    for (const endpoint of endpoints) assert.equal(endpoint.auth, "admin", endpoint.id);
  });

  test("keys: created (201, shown once) with the body as its schema parses it, listed by account, limits changed, revoked", async () => {
    const created = await call("adminCreateKey", { body: createKeyBody.parse({ account: "acme", name: "ci", rpm_limit: 5 }) });
    assert.equal(created.status, 201);
    const key = value(created);
    assert.match(key.key, /^sk-sy-/);
    assert.equal((await authenticate(db, key.key))?.accountName, "acme");
    await call("adminCreateKey", { body: createKeyBody.parse({ account: "globex" }) });

    const acme = value(await call("adminListKeys", { query: { account: "acme" } }));
    assert.equal(acme.object, "list");
    assert.deepEqual(
      acme.data.map((k: any) => k.id),
      [key.id],
    );
    assert.ok(
      acme.data.every((k: any) => k.key === undefined),
      "no secret listed",
    );
    // An empty account filter is no filter.
    assert.equal(value(await call("adminListKeys", { query: { account: "" } })).data.length, 2);

    const patched = value(
      await call("adminPatchKey", { params: { id: key.id }, body: patchKeyBody.parse({ rpm_limit: null, tpm_limit: 100 }) }),
    );
    assert.equal(patched.rpm_limit, null);
    assert.equal(patched.tpm_limit, 100);
    await assert.rejects(call("adminPatchKey", { params: { id: "key_none" }, body: { rpm_limit: 1 } }), refusal(404));

    assert.deepEqual(value(await call("adminRevokeKey", { params: { id: key.id } })), { id: key.id, object: "api_key", revoked: true });
    assert.equal(await authenticate(db, key.key), null);
    // Revoking again answers the same; an unknown id is a 404.
    assert.equal(value(await call("adminRevokeKey", { params: { id: key.id } })).revoked, true);
    await assert.rejects(call("adminRevokeKey", { params: { id: "key_none" } }), refusal(404));
  });

  test("usage: the account is required and named before the rest of the query is read; an unknown account is a 404", async () => {
    const usage = byId("adminUsage");
    for (const raw of [{}, { account: "  " }, { account: ["a", "b"] }, { account: "", group_by: "week" }]) {
      assert.throws(
        () => usage.parseQuery!(raw),
        (e) => e instanceof ServiceError && e.status === 400 && e.param === "account",
        JSON.stringify(raw),
      );
    }
    assert.throws(
      () => usage.parseQuery!({ account: "acme", group_by: "week" }),
      (e) => e instanceof ServiceError && e.status === 400 && e.param === "group_by",
    );
    const query = usage.parseQuery!({ account: " acme ", group_by: "model" }) as { account: string };
    assert.equal(query.account, "acme");
    const answer = await usage.run(null, { params: {}, query, body: undefined });
    // Exact decimals: written out as text, the account named.
    assert.equal(answer.type, "json-text");
    assert.equal(value(answer).account, "acme");
    await assert.rejects(usage.run(null, { params: {}, query: usage.parseQuery!({ account: "nobody" }), body: undefined }), refusal(404));
  });

  test("accounts: disabled and enabled by name; an unknown name is a 404", async () => {
    const disabled = value(await call("adminDisableAccount", { params: { name: "globex" } }));
    assert.equal(disabled.name, "globex");
    assert.equal(disabled.disabled, true);
    assert.equal(value(await call("adminEnableAccount", { params: { name: "globex" } })).disabled, false);
    await assert.rejects(call("adminDisableAccount", { params: { name: "nobody" } }), refusal(404));
  });
});
