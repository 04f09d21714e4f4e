import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { chatLine, upload } from "../helpers/batches.js";
import { openAiError, rawExchange } from "../helpers/raw-http.js";
import { expectError } from "../helpers/requests.js";
import { SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

/**
 * Issue 30 items 5 and 6 (outside files and batch lines): no input gets a 500, and the smaller
 * faults of the hostile-tenant probe, each with the request it sent. The body-parser rules apply
 * to every route, so each is tried on several.
 */
describe("tenant guards on input (issue 30: items 5, 6)", () => {
  let server: SharedServer;
  before(async () => {
    server = await sharedServer();
  });
  after(async () => {
    await server?.stop();
  });

  const send = (method: string, path: string, body?: string, key = server.key) =>
    fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
  const post = (path: string, body: unknown, key = server.key) =>
    send("POST", path, typeof body === "string" ? body : JSON.stringify(body), key);
  const chat = (extra: Record<string, unknown> = {}) => ({
    model: SMOLLM2,
    messages: [{ role: "user", content: "Say hi." }],
    max_tokens: 2,
    ...extra,
  });
  const client = (key = server.key) => new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, timeout: 180_000, maxRetries: 0 });

  test("item 5: a field nested 200,000 deep is a 400 nesting_too_deep naming it on chat, responses, embeddings and stored-completion update; the server stays up", async () => {
    const deepArray = "[".repeat(200_000) + "]".repeat(200_000);
    const deepObject = `${'{"a":'.repeat(200_000)}1${"}".repeat(200_000)}`;
    const cases: Array<[string, string, string]> = [
      [
        "/v1/chat/completions",
        `{"model":"${SMOLLM2}","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"extra":${deepArray}}`,
        "extra[0]",
      ],
      // Before: a schema-checked field's error message previewed it with JSON.stringify, which overflowed (500).
      [
        "/v1/chat/completions",
        `{"model":"${SMOLLM2}","messages":[{"role":"user","content":"hi"}],"service_tier":${deepArray}}`,
        "service_tier[0]",
      ],
      [
        "/v1/chat/completions",
        `{"model":"${SMOLLM2}","messages":[{"role":"user","content":"hi"}],"store":true,"metadata":${deepObject}}`,
        "metadata.a",
      ],
      ["/v1/responses", `{"model":"${SMOLLM2}","input":${deepArray}}`, "input[0]"],
      ["/v1/embeddings", `{"model":"sentence-transformers/all-MiniLM-L6-v2","input":${deepArray}}`, "input[0]"],
      ["/v1/chat/completions/chatcmpl_any", `{"metadata":${deepObject}}`, "metadata.a"],
    ];
    for (const [path, body, param] of cases) {
      const error = await expectError(await post(path, body), 400, { code: "nesting_too_deep", param, type: "invalid_request_error" });
      assert.match(error.message, /nested more than 128 levels deep/);
    }
    // 128 levels pass the parser: a schema that deep gets the grammar's own error, naming where in the schema.
    let schema: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < 60; i++) schema = { type: "object", properties: { a: schema } };
    const format = { type: "json_schema", json_schema: { name: "deep", schema } };
    await expectError(await post("/v1/chat/completions", chat({ response_format: format })), 400, {
      code: "invalid_schema",
      param: "response_format.json_schema.schema",
    });
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    assert.equal((await post("/v1/chat/completions", chat())).status, 200);
  });

  test("item 5: a NUL in a metadata key or value is a 400 before storage on chat store:true, batches, key names and stored-completion update", async () => {
    const before = await client().chat.completions.list();
    await expectError(await post("/v1/chat/completions", chat({ store: true, metadata: { "own\u0000er": "x" } })), 400, {
      param: "metadata",
      code: "invalid_value",
    });
    await expectError(await post("/v1/chat/completions", chat({ store: true, metadata: { owner: "x\u0000" } })), 400, {
      param: "metadata.owner",
      code: "invalid_value",
    });
    await expectError(await post("/v1/chat/completions", chat({ store: true, messages: [{ role: "user", content: "h\u0000i" }] })), 400, {
      param: "messages[0].content",
    });
    await expectError(await post("/v1/responses", { model: SMOLLM2, input: "hi", metadata: { a: "\u0000" } }), 400, {
      param: "metadata.a",
    });
    assert.equal((await client().chat.completions.list()).data.length, before.data.length, "nothing was stored");

    const file = await upload(client(), [chatLine("one", "Say hi.")]);
    await expectError(
      await post("/v1/batches", {
        input_file_id: file.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
        metadata: { "k\u0000": "v" },
      }),
      400,
      { param: "metadata" },
    );
    await expectError(
      await post("/v1/batches", {
        input_file_id: file.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
        metadata: { k: "v\u0000" },
      }),
      400,
      { param: "metadata.k" },
    );
    assert.equal((await client().batches.list()).data.length, 0, "no batch was created");

    const manager = (await server.newKey("nul-manager", { manage_keys: true })).key;
    await expectError(await post("/v1/keys", { name: "a\u0000b" }, manager), 400, { param: "name" });
    const stored = await client().chat.completions.create({ ...chat(), store: true } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    await expectError(await post(`/v1/chat/completions/${stored.id}`, { metadata: { "\u0000": "v" } }), 400, { param: "metadata" });
  });

  test("item 6: a metadata key __proto__ is a 400 naming metadata (not 'Body is not valid JSON'); 'constructor' is an ordinary key", async () => {
    const error = await expectError(await post("/v1/chat/completions", '{"model":"x","messages":[],"metadata":{"__proto__":"x"}}'), 400, {
      param: "metadata",
      code: "invalid_value",
    });
    assert.match(error.message, /'__proto__' is not accepted/);
    const stored = await client().chat.completions.create({
      ...chat(),
      store: true,
      metadata: { constructor: "c", toString: "t" },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const fetched = (await (await send("GET", `/v1/chat/completions/${stored.id}`)).json()) as { metadata: Record<string, string> };
    assert.deepEqual(fetched.metadata, { constructor: "c", toString: "t" });
    await expectError(await send("GET", "/v1/chat/completions?metadata[__proto__]=x"), 400, { param: "metadata[__proto__]" });
  });

  test("item 6: a repeated metadata[key] filter and a bare ?metadata= are 400s naming them; one filter per key still filters", async () => {
    const mine = await client().chat.completions.create({
      ...chat(),
      store: true,
      metadata: { owner: "filter-a" },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    await client().chat.completions.create({
      ...chat(),
      store: true,
      metadata: { owner: "filter-b" },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const repeated = await expectError(await send("GET", "/v1/chat/completions?metadata[owner]=filter-a&metadata[owner]=filter-b"), 400, {
      param: "metadata[owner]",
      code: "invalid_value",
    });
    assert.match(repeated.message, /more than once/);
    await expectError(await send("GET", "/v1/chat/completions?metadata=abc"), 400, { param: "metadata", code: "invalid_value" });
    const filtered = (await (await send("GET", "/v1/chat/completions?metadata[owner]=filter-a")).json()) as { data: Array<{ id: string }> };
    assert.deepEqual(
      filtered.data.map((c) => c.id),
      [mine.id],
    );
  });

  test("item 6: validation errors of stored completions and input_items carry a code, as create's do", async () => {
    const stored = await client().chat.completions.create({ ...chat(), store: true } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const pairs = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"]));
    await expectError(await post(`/v1/chat/completions/${stored.id}`, { metadata: pairs }), 400, {
      param: "metadata",
      code: "invalid_value",
    });
    await expectError(await post(`/v1/chat/completions/${stored.id}`, { metadata: { a: 1 } }), 400, {
      param: "metadata.a",
      code: "invalid_type",
    });
    await expectError(await send("GET", "/v1/chat/completions?limit=0"), 400, { param: "limit", code: "invalid_value" });
    await expectError(await send("GET", `/v1/chat/completions/${stored.id}/messages?order=sideways`), 400, {
      param: "order",
      code: "invalid_value",
    });
    const response = await client().responses.create({ model: SMOLLM2, input: "hi", max_output_tokens: 2 });
    await expectError(await send("GET", `/v1/responses/${response.id}/input_items?limit=1000`), 400, {
      param: "limit",
      code: "invalid_value",
    });
    await expectError(await send("GET", `/v1/responses/${response.id}/input_items?after=garbage`), 400, {
      param: "after",
      code: "invalid_value",
    });
  });

  test("item 6: 2,049 embedding inputs or an empty list are 400s naming 'input' and the 2,048 limit", async () => {
    const model = "sentence-transformers/all-MiniLM-L6-v2";
    const tooMany = await expectError(await post("/v1/embeddings", { model, input: Array(2049).fill("a") }), 400, { param: "input" });
    assert.match(tooMany.message, /2049 inputs; the limit is 2048/);
    const tooManyTokens = await expectError(await post("/v1/embeddings", { model, input: Array(2049).fill([1]) }), 400, { param: "input" });
    assert.match(tooManyTokens.message, /the limit is 2048/);
    const empty = await expectError(await post("/v1/embeddings", { model, input: [] }), 400, { param: "input" });
    assert.match(empty.message, /at least one input/);
  });

  test("item 6: after=garbage is a 400 naming 'after' on files and batches, as on the other lists; a real cursor still pages", async () => {
    await expectError(await send("GET", "/v1/files?after=garbage"), 400, { param: "after", code: "invalid_value" });
    await expectError(await send("GET", "/v1/batches?after=garbage"), 400, { param: "after", code: "invalid_value" });
    await expectError(await send("GET", "/v1/chat/completions?after=garbage"), 400, { param: "after", code: "invalid_value" });
    const first = await upload(client(), [chatLine("a", "Say hi.")], "first.jsonl");
    const second = await upload(client(), [chatLine("b", "Say hi.")], "second.jsonl");
    const page = (await (await send("GET", `/v1/files?after=${second.id}`)).json()) as { data: Array<{ id: string }> };
    assert.ok(
      page.data.some((f) => f.id === first.id),
      JSON.stringify(page),
    );
    // Another account's file is no cursor here.
    const stranger = (await server.newKey("cursor-stranger")).key;
    await expectError(await send("GET", `/v1/files?after=${first.id}`, undefined, stranger), 400, { param: "after" });
  });

  test("item 6: background: true on the Responses API runs in the background (issue 54: answered at once, queued)", async () => {
    const background = await post("/v1/responses", { model: SMOLLM2, input: "hi", max_output_tokens: 2, background: true });
    assert.equal(background.status, 200, await background.clone().text());
    assert.deepEqual(((await background.json()) as { status: string; background: boolean }).status, "queued");
    const foreground = await post("/v1/responses", { model: SMOLLM2, input: "hi", max_output_tokens: 2, background: false });
    assert.equal(foreground.status, 200, await foreground.clone().text());
  });

  test("item 6: a function_call_output answering no call is a 400 naming input[i].call_id; one answering a call before it runs", async () => {
    const orphans = Array.from({ length: 1000 }, (_, i) => ({ type: "function_call_output", call_id: `call_${i}`, output: "x" }));
    const error = await expectError(await post("/v1/responses", { model: SMOLLM2, input: orphans, max_output_tokens: 2 }), 400, {
      param: "input[0].call_id",
      code: "invalid_value",
    });
    assert.match(error.message, /No tool call found for function call output with call_id 'call_0'/);
    const call = { type: "function_call", call_id: "call_weather", name: "get_weather", arguments: "{}" };
    const answered = { type: "function_call_output", call_id: "call_weather", output: "sunny" };
    await expectError(await post("/v1/responses", { model: SMOLLM2, input: [answered, call], max_output_tokens: 2 }), 400, {
      param: "input[0].call_id",
    });
    const paired = await post("/v1/responses", {
      model: SMOLLM2,
      input: [{ role: "user", content: "Weather?" }, call, answered],
      max_output_tokens: 2,
    });
    assert.equal(paired.status, 200, await paired.clone().text());
  });

  test("item 6: a request larger than the whole TPM limit is a 429 request_too_large without Retry-After, which the official client does not retry", async () => {
    const { key } = await server.newKey("tpm-account", { tpm_limit: 200 });
    const response = await post("/v1/chat/completions", chat({ max_tokens: 1000 }), key);
    const error = await expectError(response, 429, { code: "request_too_large", type: "rate_limit_error" });
    assert.match(error.message, /Limit 200, Requested \d+\. It can never fit/);
    assert.equal(response.headers.get("retry-after"), null);
    assert.equal(response.headers.get("x-should-retry"), "false");
    const rejectedSoFar = async () =>
      ((await (await send("GET", "/v1/usage", undefined, key)).json()) as { totals: { by_status: Record<string, number> } }).totals
        .by_status.rejected ?? 0;
    const before = await rejectedSoFar();
    const retrying = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 2 });
    await assert.rejects(
      retrying.chat.completions.create({ ...chat(), max_tokens: 1000 } as OpenAI.ChatCompletionCreateParamsNonStreaming),
      (e: unknown) => e instanceof OpenAI.RateLimitError,
    );
    assert.equal(await rejectedSoFar(), before + 1, "one attempt, no retries");
    // Within the limit, the ordinary 429 still says when to come back: three at once hold their estimates together.
    const together = await Promise.all([1, 2, 3].map(() => post("/v1/chat/completions", chat({ max_tokens: 80 }), key)));
    const limited = together.find((r) => r.status === 429);
    assert.ok(limited, `statuses ${together.map((r) => r.status).join(", ")}`);
    await expectError(limited, 429, { code: "rate_limit_exceeded" });
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    await Promise.all(together.map((r) => (r.bodyUsed ? undefined : r.arrayBuffer())));
  });

  test("item 6: two Authorization headers are a 400 naming the header, whichever of them is valid", async () => {
    const { host } = new URL(server.url);
    for (const [first, second] of [
      [server.key, "sk-wrong"],
      ["sk-wrong", server.key],
      [server.key, server.key],
    ]) {
      const request = `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${first}\r\nAuthorization: Bearer ${second}\r\nConnection: close\r\n\r\n`;
      const reply = await rawExchange(server.url, request, 10_000);
      assert.equal(reply.status, 400, reply.body);
      const error = openAiError(reply.body);
      assert.equal(error?.code, "duplicate_authorization_header", reply.body);
      assert.match(error!.message, /2 Authorization headers/);
    }
    const one = await rawExchange(
      server.url,
      `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${server.key}\r\nConnection: close\r\n\r\n`,
      10_000,
    );
    assert.equal(one.status, 200);
  });
});
