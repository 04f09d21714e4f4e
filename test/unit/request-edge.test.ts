import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { buildBaseApp } from "../../src/http/app.js";
import { newRequestId } from "../../src/protocol/request-ids.js";
import type { Principal } from "../../src/protocol/principal.js";

/** The base app every server shares, with one keyed route and one admin route, answered in-process. */
async function appWith(corsOrigins?: string[]): Promise<FastifyInstance> {
  const caller = { keyId: "key_1", accountId: "acct_1", limits: {} } as unknown as Principal;
  const app = buildBaseApp({ authenticate: async (key) => (key === "good" ? caller : null), bodyLimit: 1 << 20, corsOrigins });
  app.post("/v1/things", async () => ({ ok: true }));
  app.get("/admin/v1/keys", { config: { auth: "none" } }, async () => ({ admin: true }));
  await app.ready();
  return app;
}

describe("CORS and request ids at the edge (@fastify/cors as http/cors.ts sets it up, protocol/request-ids.ts)", () => {
  test("a preflight is answered 204 before any key check, with what a browser asks for", async () => {
    const app = await appWith();
    const preflight = await app.inject({
      method: "OPTIONS",
      url: "/v1/chat/completions",
      headers: {
        origin: "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization",
      },
    });
    assert.equal(preflight.statusCode, 204);
    assert.equal(preflight.headers["content-length"], "0");
    assert.equal(preflight.headers["access-control-allow-origin"], "*");
    assert.equal(preflight.headers["access-control-allow-methods"], "GET, POST, PATCH, DELETE, OPTIONS");
    assert.equal(preflight.headers["access-control-allow-headers"], "authorization");
    assert.equal(preflight.headers["access-control-max-age"], "600");
    // Any origin gets "*", so the answer does not vary by Origin (only a list of origins adds it).
    assert.equal(preflight.headers.vary, "Access-Control-Request-Headers");
    assert.match(String(preflight.headers["x-request-id"]), /^chatcmpl-/);
    await app.close();
  });

  test("answers carry the exposed headers; a refused key gets no CORS headers; admin routes answer no origin", async () => {
    const app = await appWith();
    const ok = await app.inject({ method: "POST", url: "/v1/things", headers: { authorization: "Bearer good" }, payload: {} });
    assert.equal(ok.statusCode, 200);
    assert.equal(ok.headers["access-control-allow-origin"], "*");
    assert.match(String(ok.headers["access-control-expose-headers"]), /^x-request-id, retry-after, x-ratelimit-limit-requests/);
    const refused = await app.inject({ method: "POST", url: "/v1/things", headers: { authorization: "Bearer bad" }, payload: {} });
    assert.equal(refused.statusCode, 401);
    assert.equal(refused.headers["access-control-allow-origin"], undefined);
    const adminPreflight = await app.inject({
      method: "OPTIONS",
      url: "/admin/v1/keys",
      headers: { origin: "https://app.example", "access-control-request-method": "GET" },
    });
    assert.equal(adminPreflight.statusCode, 404);
    assert.equal(adminPreflight.headers["access-control-allow-origin"], undefined);
    const admin = await app.inject({ method: "GET", url: "/admin/v1/keys", headers: { origin: "https://app.example" } });
    assert.equal(admin.statusCode, 200);
    assert.equal(admin.headers["access-control-allow-origin"], undefined);
    assert.equal(admin.headers.vary, undefined);
    await app.close();
  });

  test("configured origins: a listed one is echoed, another gets no Allow-Origin", async () => {
    const app = await appWith(["https://allowed.example"]);
    const from = (origin: string) =>
      app.inject({ method: "OPTIONS", url: "/v1/models", headers: { origin, "access-control-request-method": "GET" } });
    assert.equal((await from("https://allowed.example")).headers["access-control-allow-origin"], "https://allowed.example");
    const other = await from("https://elsewhere.example");
    assert.equal(other.statusCode, 204);
    assert.equal(other.headers["access-control-allow-origin"], undefined);
    await app.close();
  });

  test("request ids drawn from the pooled random bytes are distinct and shaped as before, across refills", () => {
    const ids = Array.from({ length: 2000 }, () => newRequestId("embeddings"));
    for (const id of ids) assert.match(id, /^req_[A-Za-z0-9_-]{24}$/);
    assert.equal(new Set(ids).size, ids.length);
  });
});
