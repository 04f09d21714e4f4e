import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { expectError } from "../helpers/requests.js";
import { adminKey, ROOT, SMOLLM2, startServer, type RunningServer } from "../helpers/server.js";

/**
 * A Python with the official `openai` package, for the test that drives the real Python client:
 * SWITCHYARD_TEST_PYTHON, else a venv at .cache/py-openai (`python3 -m venv .cache/py-openai &&
 * .cache/py-openai/bin/pip install openai`). Without one that test is skipped, saying so; the
 * exact raw requests above cover the same calls.
 */
const PYTHON = process.env.SWITCHYARD_TEST_PYTHON ?? join(ROOT, ".cache/py-openai/bin/python");

/**
 * Issue 20 ("Tenants cannot hurt each other"), items 4, 5, 11 and 13, each with the exact request
 * the hostile-tenant attack sent: empty JSON bodies on body-less routes, ids and text that cannot
 * be stored, URLs the router refuses, and /docs' security headers.
 */
const ADMIN_KEY = "admin-token-for-guards-edge-tests";

describe("tenant guards at the edge (issue 20: items 4, 5, 11, 13)", () => {
  let server: RunningServer;
  let keyManager = "";
  before(async () => {
    // The key may manage deployments, so the deployment routes answer what their input deserves.
    server = await startServer({ env: { SWITCHYARD_ADMIN_KEY: ADMIN_KEY }, keyArgs: ["--manage-deployments"] });
    keyManager = await adminKey(server, "manager", { manage_keys: true });
  });
  after(async () => {
    await server?.stop();
  });

  /** What the official Python SDK sends for a body-less call: Content-Type: application/json and an empty body. */
  const emptyJson = (method: string, path: string, key = server.key) =>
    fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: "" });
  const json = (method: string, path: string, body: string, key = server.key) =>
    fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
  async function completedRequests(): Promise<number> {
    const response = await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${server.key}` } });
    return ((await response.json()) as { totals: { by_status: Record<string, number> } }).totals.by_status.completed!;
  }

  test("item 4: an empty JSON body on the responses routes is no body: unknown ids are 404, a stored response is cancelled (400) and deleted", async () => {
    await expectError(await emptyJson("DELETE", "/v1/responses/resp_does_not_exist"), 404, { code: "not_found" });
    await expectError(await emptyJson("POST", "/v1/responses/resp_does_not_exist/cancel"), 404, { code: "not_found" });
    const created = await json("POST", "/v1/responses", JSON.stringify({ model: SMOLLM2, input: "Say hi.", max_output_tokens: 4 }));
    assert.equal(created.status, 200, await created.clone().text());
    const { id } = (await created.json()) as { id: string };
    await expectError(await emptyJson("POST", `/v1/responses/${id}/cancel`), 400, { code: "not_cancellable" });
    const deleted = await emptyJson("DELETE", `/v1/responses/${id}`);
    assert.equal(deleted.status, 200, await deleted.clone().text());
    assert.deepEqual(await deleted.json(), { id, object: "response", deleted: true });
    await expectError(await emptyJson("DELETE", `/v1/responses/${id}`), 404, { code: "not_found" });
  });

  test("item 4: models.delete, DELETE /v1/keys/{id} and DELETE /v1/deployments/{id} with an empty JSON body", async () => {
    await expectError(await emptyJson("DELETE", `/v1/models/${SMOLLM2}`), 403, { code: "model_not_deletable", type: "permission_error" });
    await expectError(await emptyJson("DELETE", "/v1/models/nobody/no-such-model"), 404, { code: "model_not_found" });
    await expectError(await emptyJson("DELETE", "/v1/keys/key_does_not_exist", keyManager), 404, { code: "not_found" });
    const minted = await json("POST", "/v1/keys", JSON.stringify({ name: "short-lived" }), keyManager);
    assert.equal(minted.status, 201, await minted.clone().text());
    const { id } = (await minted.json()) as { id: string };
    const revoked = await emptyJson("DELETE", `/v1/keys/${id}`, keyManager);
    assert.equal(revoked.status, 200, await revoked.clone().text());
    assert.equal(((await revoked.json()) as { revoked: boolean }).revoked, true);
    await expectError(await emptyJson("DELETE", "/v1/deployments/dep_does_not_exist"), 404, { code: "not_found" });
  });

  test("item 4: the admin routes' DELETE and POST with an empty JSON body", async () => {
    await expectError(await emptyJson("DELETE", "/admin/v1/keys/key_does_not_exist", ADMIN_KEY), 404, { code: "not_found" });
    await expectError(await emptyJson("POST", "/admin/v1/accounts/no-such-account/disable", ADMIN_KEY), 404, { code: "not_found" });
    await adminKey(server, "switched");
    for (const action of ["disable", "enable"]) {
      const response = await emptyJson("POST", `/admin/v1/accounts/switched/${action}`, ADMIN_KEY);
      assert.equal(response.status, 200, await response.clone().text());
      assert.equal(((await response.json()) as { disabled: boolean }).disabled, action === "disable");
    }
  });

  test("item 4: a route that needs a body answers a clear 400 for an empty one", async () => {
    for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/responses"]) {
      await expectError(await emptyJson("POST", path), 400, { code: "missing_body" });
    }
    await expectError(await emptyJson("POST", "/admin/v1/keys", ADMIN_KEY), 400, { param: "account" });
    await expectError(await emptyJson("POST", "/v1/deployments"), 400, { param: "model" });
  });

  test(
    "item 4: the official Python SDK's body-less calls (responses.cancel / delete, models.delete) get their real answers",
    { skip: existsSync(PYTHON) ? false : `no Python with the openai package at ${PYTHON}` },
    async () => {
      const created = await json("POST", "/v1/responses", JSON.stringify({ model: SMOLLM2, input: "Say hi.", max_output_tokens: 4 }));
      assert.equal(created.status, 200, await created.clone().text());
      const { id } = (await created.json()) as { id: string };
      const script = join(ROOT, "test/fixtures/python-sdk-bodyless.py");
      const { stdout } = await promisify(execFile)(PYTHON, [script, `${server.url}/v1`, server.key, SMOLLM2, id], { timeout: 300_000 });
      const outcomes = Object.fromEntries(
        stdout
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line) as { call: string; status: number; code?: string })
          .map((o) => [o.call, o]),
      );
      assert.deepEqual(
        Object.fromEntries(Object.entries(outcomes).map(([call, o]) => [call, [o.status, o.code ?? null]])),
        {
          "responses.cancel unknown": [404, "not_found"],
          "responses.delete unknown": [404, "not_found"],
          "models.delete unknown": [404, "model_not_found"],
          "models.delete served": [403, "model_not_deletable"],
          "responses.cancel stored": [400, "not_cancellable"],
          "responses.delete stored": [200, null],
        },
        stdout,
      );
    },
  );

  test("item 5: a NUL in a path id is a 404 in the OpenAI shape, never a storage error", async () => {
    for (const [method, path] of [
      ["GET", "/v1/deployments/%00"],
      ["PATCH", "/v1/deployments/%00"],
      ["DELETE", "/v1/deployments/%00"],
      ["GET", "/v1/responses/%00"],
      ["DELETE", "/v1/responses/%00"],
    ] as const) {
      const body = method === "PATCH" ? JSON.stringify({ min_instances: 0 }) : undefined;
      const response = await fetch(`${server.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${server.key}`, ...(body ? { "content-type": "application/json" } : {}) },
        body,
      });
      await expectError(response, 404, { code: "not_found" });
    }
  });

  test("item 5: previous_response_id with a NUL, and a lone surrogate in the input, are 400s naming the field, and nothing is billed", async () => {
    const before = await completedRequests();
    await expectError(
      await json("POST", "/v1/responses", JSON.stringify({ model: SMOLLM2, input: "hi", previous_response_id: "resp_\u0000" })),
      400,
      { param: "previous_response_id" },
    );
    // The exact request, as JSON text with the escape: no encoder would produce it from a string.
    await expectError(await json("POST", "/v1/responses", '{"input":"a\\ud800b"}'), 400, { param: "input", code: "invalid_unicode" });
    await expectError(await json("POST", "/v1/responses", `{"model":"${SMOLLM2}","input":"a\\ud800b","max_output_tokens":2}`), 400, {
      param: "input",
      code: "invalid_unicode",
    });
    await expectError(
      await json("POST", "/v1/chat/completions", `{"model":"${SMOLLM2}","messages":[{"role":"user","content":"\\udc00"}]}`),
      400,
      { param: "messages[0].content" },
    );
    await expectError(await json("POST", "/v1/deployments", JSON.stringify({ model: SMOLLM2, name: "a\u0000b" })), 400, { param: "name" });
    assert.equal(await completedRequests(), before, "a refused request is never billed as completed");
  });

  test("item 11: a bad percent-encoding and an over-long path parameter get the OpenAI shape, echoing nothing long", async () => {
    const bad = await expectError(
      await fetch(`${server.url}/v1/models/%ff%fe`, { headers: { authorization: `Bearer ${server.key}` } }),
      400,
      { code: "invalid_url" },
    );
    assert.ok(!bad.text.includes("%ff"), bad.text);
    const long = "d".repeat(150);
    const tooLong = await expectError(
      await fetch(`${server.url}/v1/deployments/${long}`, { headers: { authorization: `Bearer ${server.key}` } }),
      414,
      { code: "path_parameter_too_long" },
    );
    assert.ok(!tooLong.text.includes(long.slice(0, 101)), tooLong.text);
    const unknown = await expectError(
      await fetch(`${server.url}/v1/${"x".repeat(2000)}?secret=1`, { headers: { authorization: `Bearer ${server.key}` } }),
      404,
      { code: "unknown_url" },
    );
    assert.ok(unknown.text.length < 400 && !unknown.text.includes("secret"), unknown.text);
  });

  test("item 13: /docs, its start script and swagger-ui's assets carry the console's security headers", async () => {
    const page = await fetch(`${server.url}/docs`);
    const html = await page.text();
    assert.equal(page.status, 200);
    for (const path of ["/docs", "/docs/start.js", "/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"]) {
      const response = await fetch(`${server.url}${path}`);
      await response.arrayBuffer();
      assert.equal(response.status, 200, path);
      assert.match(
        response.headers.get("content-security-policy") ?? "",
        /default-src 'none'.*script-src 'self'.*frame-ancestors 'none'/,
        path,
      );
      assert.equal(response.headers.get("x-frame-options"), "DENY", path);
      assert.equal(response.headers.get("x-content-type-options"), "nosniff", path);
    }
    // script-src 'self' allows no inline script: the page loads its start code as a file.
    assert.ok(!/<script>/.test(html), html);
    assert.match(html, /<script src="\/docs\/start.js"><\/script>/);
  });
});
