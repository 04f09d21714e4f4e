import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { openAiError } from "../helpers/raw-http.js";
import { SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

/**
 * Issue 11: what schema fuzzing of the OpenAPI document (bench/fuzz-openapi.sh) found: every
 * answer is below 500, and every error is in the OpenAI shape.
 */
describe("schema fuzzing's findings (issue 11)", () => {
  let server: SharedServer;
  before(async () => {
    server = await sharedServer();
  });
  after(async () => {
    await server?.stop();
  });
  const get = (path: string) => fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.key}` } });

  test("a model id with an escaped % is looked up as sent, not decoded twice into a 500", async () => {
    for (const path of ["/v1/compat/models/a%25b", "/v1/openai/models/%25C2%2582x", "/v1/models/%25"]) {
      const response = await get(path);
      const text = await response.text();
      assert.equal(response.status, 404, `${path}: ${text}`);
      assert.equal(openAiError(text)?.code, "model_not_found", text);
    }
    const known = await get(`/v1/compat/models/${encodeURIComponent(SMOLLM2)}`);
    assert.equal(known.status, 200, await known.clone().text());
    assert.equal(((await known.json()) as { id: string }).id, SMOLLM2);
  });

  test("a NUL byte in completions' or responses' model or text is a 400 naming it, not a storage error (500)", async () => {
    const post = (path: string, body: unknown) =>
      fetch(`${server.baseURL}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${server.key}` },
        body: JSON.stringify(body),
      });
    const cases: Array<[string, unknown, string]> = [
      ["/completions", { model: `${SMOLLM2}\u0000`, prompt: "hi", max_tokens: 2 }, "model"],
      ["/completions", { model: "\u0000", prompt: "hi", max_tokens: 2 }, "model"],
      ["/responses", { model: `${SMOLLM2}\u0000`, input: "hi", max_output_tokens: 2 }, "model"],
      ["/responses", { model: SMOLLM2, input: "h\u0000i", max_output_tokens: 2 }, "input"],
      ["/responses", { model: SMOLLM2, input: "hi", instructions: "\u0000", max_output_tokens: 2 }, "instructions"],
    ];
    for (const [path, body, param] of cases) {
      const response = await post(path, body);
      const text = await response.text();
      assert.equal(response.status, 400, `${path} ${JSON.stringify(body)}: ${text}`);
      assert.equal(openAiError(text)?.param, param, text);
    }
  });

  test("an OPTIONS request that is no browser preflight (no Origin) is not answered with a text/plain 400", async () => {
    for (const path of ["/v1/chat/completions", "/health", "/v1/models"]) {
      const response = await fetch(`${server.url}${path}`, { method: "OPTIONS" });
      const text = await response.text();
      assert.ok(response.status < 400 || openAiError(text), `${path}: ${response.status} ${text}`);
    }
    // A real preflight still gets its CORS answer.
    const preflight = await fetch(`${server.url}/v1/chat/completions`, {
      method: "OPTIONS",
      headers: { origin: "https://example.com", "access-control-request-method": "POST" },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "*");
  });
});
