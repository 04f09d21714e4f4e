import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { FULL_CONTEXT, postChat, startServer, SMOLLM2, type RunningServer } from "../helpers/server.js";
import { expectError as expectOpenAiError } from "../helpers/requests.js";

/**
 * Every error is in the OpenAI shape, with the right status, param and code, exactly the four
 * fields, a message that says something, and the type invalid_request_error unless given.
 */
async function expectError(response: Response, status: number, expected: { param?: string | null; code?: string | null; type?: string }) {
  const error = await expectOpenAiError(response, status, { type: "invalid_request_error", ...expected });
  assert.deepEqual(Object.keys(JSON.parse(error.text).error).sort(), ["code", "message", "param", "type"]);
  assert.ok(error.message.length > 0);
  return error;
}

const ok = (extra: Record<string, unknown> = {}) => ({
  model: SMOLLM2,
  messages: [{ role: "user", content: "hi" }],
  max_tokens: 4,
  ...extra,
});

describe("bad requests get clear errors and lose nothing", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({ env: { ...FULL_CONTEXT, SWITCHYARD_MAX_BODY_BYTES: "65536" } });
  });
  after(async () => {
    await server?.stop();
  });

  test("malformed JSON is a 400", async () => {
    await expectError(await postChat(server, '{"model": "x", "messages": ['), 400, { code: "invalid_json" });
  });
  test("a body that is not an object is a 400", async () => {
    await expectError(await postChat(server, "[1,2]"), 400, { param: null });
  });
  test("a missing model names the param", async () => {
    await expectError(await postChat(server, { messages: [{ role: "user", content: "hi" }] }), 400, {
      param: "model",
      code: "missing_required_parameter",
    });
  });
  test("a field of the wrong type names the param", async () => {
    await expectError(await postChat(server, ok({ temperature: "hot" })), 400, { param: "temperature" });
    await expectError(await postChat(server, ok({ stream: "yes" })), 400, { param: "stream" });
    await expectError(await postChat(server, ok({ max_tokens: 1.5 })), 400, { param: "max_tokens" });
    await expectError(await postChat(server, ok({ messages: [{ role: "user", content: 42 }] })), 400, { param: "messages[0].content" });
  });
  test("a value out of range names the param", async () => {
    await expectError(await postChat(server, ok({ temperature: 3 })), 400, { param: "temperature" });
    await expectError(await postChat(server, ok({ top_p: 0 })), 400, { param: "top_p" });
    await expectError(await postChat(server, ok({ max_tokens: 0 })), 400, { param: "max_tokens" });
  });
  test("empty messages is a 400", async () => {
    await expectError(await postChat(server, ok({ messages: [] })), 400, { param: "messages" });
  });
  test("an unknown role is a 400 naming the message", async () => {
    const error = await expectError(await postChat(server, ok({ messages: [{ role: "wizard", content: "hi" }] })), 400, {
      param: "messages[0].role",
    });
    assert.match(error.message, /wizard/);
  });
  test("an unknown model is a 404 model_not_found", async () => {
    await expectError(await postChat(server, ok({ model: "nobody/nothing" })), 404, { param: "model", code: "model_not_found" });
  });
  test("prompt plus max_tokens over the context is context_length_exceeded", async () => {
    const error = await expectError(await postChat(server, ok({ max_tokens: 8190 })), 400, {
      param: "messages",
      code: "context_length_exceeded",
    });
    assert.match(error.message, /8192/);
    const long = "word ".repeat(9000);
    await expectError(await postChat(server, ok({ messages: [{ role: "user", content: long }], max_tokens: undefined })), 400, {
      code: "context_length_exceeded",
    });
  });
  test("a body over the configured size is a 413", async () => {
    await expectError(await postChat(server, ok({ messages: [{ role: "user", content: "x".repeat(70_000) }] })), 413, {
      code: "request_too_large",
    });
  });
  test("an unknown URL is a 404 in the same shape", async () => {
    const response = await fetch(`${server.url}/v1/compat/nothing`, { headers: { authorization: `Bearer ${server.key}` } });
    await expectError(response, 404, { code: "unknown_url" });
  });
  test("after all of that the model still answers", async () => {
    const response = await postChat(server, ok());
    assert.equal(response.status, 200);
    const body = await response.json();
    assert.equal(body.object, "chat.completion");
    const health = await (await fetch(`${server.url}/health`)).json();
    assert.equal(health.models[0].running, 0);
  });
});
