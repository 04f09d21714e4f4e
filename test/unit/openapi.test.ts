import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { createSpendBudgets } from "../../src/billing/budgets.js";
import { createUsageLedger } from "../../src/billing/ledger.js";
import { loadCatalog } from "../../src/catalog/load.js";
import { openRequestLimits, type OpenedRequestLimits } from "../../src/limits/open.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { createResponseStore } from "../../src/api/responses/response-store.js";
import { buildApp } from "../../src/http/app.js";
import { createAccountAdmin } from "../../src/accounts/account-admin.js";
import { createUsageReports } from "../../src/billing/usage-reports.js";
import { createAccountKeys } from "../../src/accounts/account-keys.js";
import { createDeploymentManager } from "../../src/deployments/manager.js";
import { createAdapterManager } from "../../src/adapters/manager.js";
import { DEFAULT_ADAPTER_LIMITS } from "../../src/adapters/types.js";
import { createChatService } from "../../src/serving/chat-service.js";
import { createModelRegistry } from "../../src/serving/model-registry.js";
import type { Database } from "../../src/storage/database.js";
import { openDatabase } from "../../src/storage/open.js";
import { migratedDataDir } from "../helpers/databases.js";

/** The real app as `serve` builds it (no model loaded: routes and documents need none), with every route it registers. */
const ADMIN_TOKEN = "admin-token-for-the-openapi-test";

describe("the OpenAPI document and the reference page", () => {
  let app: FastifyInstance;
  let db: Database;
  let dataDir: string;
  let limits: OpenedRequestLimits;
  const routes: Array<{ method: string; url: string }> = [];
  let document: any;

  before(async () => {
    dataDir = await migratedDataDir("switchyard-openapi-");
    db = await openDatabase({ dataDir });
    limits = await openRequestLimits({});
    const registry = createModelRegistry(await loadCatalog({}));
    app = buildApp({
      chat: createChatService({ registry, ledger: createUsageLedger(db), limits, budgets: createSpendBudgets(db) }),
      registry,
      usage: createUsageReports(db),
      keys: createAccountKeys(db),
      responses: createResponseStore(db, { perAccount: 10_000, retentionDays: 30 }),
      metrics: createMetrics(() => []),
      authenticate: async () => null,
      bodyLimit: 1 << 20,
      // The real manager, never started: the routes are what is checked here, no instance loads.
      deployments: createDeploymentManager({
        db,
        registry,
        catalog: await loadCatalog({}),
        factory: async () => Promise.reject(new Error("no engine here")),
        owner: { id: "own_openapi", isGone: async () => false },
        log: () => {},
      }),
      // The real manager, never started: an upload would answer 503.
      adapters: {
        service: createAdapterManager({ db, registry, dir: join(dataDir, "adapters"), admit: async () => {}, log: () => {} }),
        limits: DEFAULT_ADAPTER_LIMITS,
      },
      // The admin routes are part of the app buildApp builds, as serve registers them.
      admin: { admin: createAccountAdmin(db), usage: createUsageReports(db), adminToken: ADMIN_TOKEN },
    });
    app.addHook("onRoute", (route) => {
      for (const method of [route.method].flat()) routes.push({ method, url: route.url });
    });
    await app.ready();
    const response = await app.inject({ method: "GET", url: "/openapi.json" });
    assert.equal(response.statusCode, 200, "served without auth");
    document = response.json();
  });
  after(async () => {
    await app?.close();
    await limits?.close();
    await db?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  test("every route the server registers is in the document", () => {
    // HEAD is Fastify's automatic twin of each GET; OPTIONS * is the CORS preflight catch-all.
    const served = routes.filter((r) => r.method !== "HEAD" && r.method !== "OPTIONS");
    assert.ok(served.length >= 30, `routes seen: ${served.length}`);
    const documented = Object.entries(document.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    for (const route of served) {
      // `:id` is `{id}`; a trailing wildcard is the last path parameter (model ids hold a slash).
      const template = route.url.replace(/:(\w+)/g, "{$1}");
      const pattern = new RegExp(
        `^${route.method} ${template
          .replace(/[.?+^$()[\]]/g, "\\$&")
          .replace(/\*$/, "\\{\\w+\\}")
          .replace(/\{(\w+)\}/g, "\\{$1\\}")}$`,
      );
      assert.ok(
        documented.some((d) => pattern.test(d)),
        `${route.method} ${route.url} is documented`,
      );
    }
    assert.equal(documented.length, new Set(documented).size);
  });

  test("the app buildApp builds serves the admin API behind the admin token (and only the admin token)", async () => {
    const listKeys = (authorization?: string) =>
      app.inject({ method: "GET", url: "/admin/v1/keys", headers: authorization ? { authorization } : {} });
    const withToken = await listKeys(`Bearer ${ADMIN_TOKEN}`);
    assert.equal(withToken.statusCode, 200, withToken.body);
    assert.ok(Array.isArray(withToken.json().data));
    for (const refused of [undefined, "Bearer not-the-admin-token"]) {
      const response = await listKeys(refused);
      assert.equal(response.statusCode, 401, response.body);
      assert.match(response.json().error.message, /admin token/);
    }
  });

  test("request bodies are the validating zod schemas; errors have the OpenAI shape; the auth schemes are named", () => {
    assert.equal(document.openapi, "3.1.0");
    for (const prefix of ["/v1/compat", "/v1/openai", "/v1"]) {
      const chat = document.paths[`${prefix}/chat/completions`].post;
      const schema = chat.requestBody.content["application/json"].schema;
      assert.deepEqual([...schema.required].sort(), ["messages", "model"]);
      assert.deepEqual(schema.properties.temperature.anyOf[0], { type: "number", minimum: 0, maximum: 2 }, "ranges come from the schema");
      assert.ok(schema.properties.metadata, "newer fields too");
      assert.equal(chat.responses["400"].$ref, "#/components/responses/Error");
      assert.deepEqual(
        chat.security.map((s: object) => Object.keys(s)[0]),
        ["bearerKey", "apiKeyHeader", "xApiKeyHeader"],
      );
      assert.ok(document.paths[`${prefix}/responses`].post.requestBody.content["application/json"].schema.properties.previous_response_id);
      assert.ok(document.paths[`${prefix}/completions`].post.requestBody.content["application/json"].schema.properties.echo);
    }
    const error = document.components.schemas.Error;
    assert.deepEqual([...error.properties.error.required].sort(), ["code", "message", "param", "type"]);
    assert.equal(document.components.securitySchemes.apiKeyHeader.name, "api-key");
    assert.deepEqual(document.paths["/health"].get.security, []);
    assert.deepEqual(document.paths["/admin/v1/keys"].post.security, [{ adminBearer: [] }]);
  });

  test("/docs renders the document with assets served from the npm package, without auth", async () => {
    const page = await app.inject({ method: "GET", url: "/docs" });
    assert.equal(page.statusCode, 200);
    assert.match(page.headers["content-type"] as string, /text\/html/);
    const assets = [...page.body.matchAll(/(?:src|href)="(\/docs\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    assert.ok(assets.length >= 2);
    assert.doesNotMatch(page.body, /https?:\/\//, "nothing from a CDN");
    // The start script is a file (the CSP allows no inline script); it loads the document.
    assert.match(page.body, /<script src="\/docs\/start\.js"><\/script>/);
    const start = await app.inject({ method: "GET", url: "/docs/start.js" });
    assert.equal(start.statusCode, 200);
    assert.match(start.body, /\/openapi\.json/);
    for (const asset of assets) {
      const file = await app.inject({ method: "GET", url: asset });
      assert.equal(file.statusCode, 200, asset);
      assert.ok(file.rawPayload.length > 1000);
    }
    const traversal = await app.inject({ method: "GET", url: "/docs/assets/../package.json" });
    assert.notEqual(traversal.statusCode, 200);
  });
});
