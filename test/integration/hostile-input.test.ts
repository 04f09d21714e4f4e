import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { gzipSync } from "node:zlib";
import { after, before, describe, test } from "node:test";
import { postChat, startServer, SMOLLM2, type RunningServer } from "../helpers/server.js";
import { openAiError, openSocket, rawExchange, readReply } from "../helpers/raw-http.js";

/**
 * Issue 11: what a hostile or careless client sends. Every answer is a 4xx in the OpenAI error
 * shape, naming the parameter where there is one; slow sockets are cut off; nothing the client
 * sent is echoed at length or logged when it is a secret.
 */
const REQUEST_TIMEOUT_MS = 3000;
const UNAUTH_CAP = 6;
const ok = (extra: Record<string, unknown> = {}) => ({
  model: SMOLLM2,
  messages: [{ role: "user", content: "hi" }],
  max_tokens: 2,
  ...extra,
});

async function expectError(response: Response, status: number, expected: { param?: string | null; code?: string | null }) {
  const text = await response.text();
  assert.equal(response.status, status, text.slice(0, 300));
  const error = openAiError(text);
  assert.ok(error, `an OpenAI error body: ${text.slice(0, 300)}`);
  if ("param" in expected) assert.equal(error.param, expected.param);
  if ("code" in expected) assert.equal(error.code, expected.code);
  return { error, text };
}

describe("hostile and careless clients (issue 11)", () => {
  let server: RunningServer;
  let host: string;
  before(async () => {
    server = await startServer({
      env: {
        SWITCHYARD_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        SWITCHYARD_MAX_UNAUTH_CONNECTIONS_PER_IP: String(UNAUTH_CAP),
        SWITCHYARD_LOG_LEVEL: "info",
        // Every request's access line at info (the default writes it at debug), so the test can read that a key in the URL is kept out of it.
        SWITCHYARD_ACCESS_LOG: "info",
      },
    });
    host = new URL(server.url).host;
  });
  after(async () => {
    await server?.stop();
  });

  test("a value of the wrong type is invalid_type naming it, never 'missing'", async () => {
    for (const [param, value] of [
      ["max_tokens", "2"],
      ["stream", "true"],
      ["model", 5],
      ["seed", 1.5],
      ["temperature", "hot"],
    ] as const) {
      const { error } = await expectError(await postChat(server, ok({ [param]: value })), 400, { param });
      assert.notEqual(error.code, "missing_required_parameter", `${param}: ${JSON.stringify(value)}`);
      assert.ok(["invalid_type", "invalid_value"].includes(error.code!), `${param}: ${error.code}`);
    }
    // 1e400 parses to Infinity.
    const raw = JSON.stringify(ok()).replace('"max_tokens":2', '"max_tokens":1e400');
    const { error } = await expectError(await postChat(server, raw), 400, { param: "max_tokens" });
    assert.notEqual(error.code, "missing_required_parameter");
    await expectError(await postChat(server, { messages: [{ role: "user", content: "hi" }] }), 400, {
      param: "model",
      code: "missing_required_parameter",
    });
  });

  test("identifiers have a length cap, and an error echoes only a short prefix", async () => {
    const huge = "m".repeat(1_000_000);
    const { text } = await expectError(await postChat(server, ok({ model: huge })), 400, { param: "model" });
    assert.ok(text.length < 1000, `the error body is ${text.length} bytes`);
    await expectError(await postChat(server, ok({ user: "u".repeat(300) })), 400, { param: "user" });
    const metadata = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"]));
    await expectError(await postChat(server, ok({ metadata })), 400, { param: "metadata" });
    await expectError(await postChat(server, ok({ metadata: { k: "v".repeat(600) } })), 400, { param: "metadata.k" });
    const unknown = await expectError(await postChat(server, ok({ model: `nobody/${"x".repeat(240)}` })), 404, {
      param: "model",
      code: "model_not_found",
    });
    assert.ok(unknown.error.message.length < 200, unknown.error.message);
    const role = await expectError(await postChat(server, ok({ messages: [{ role: "r".repeat(100_000), content: "hi" }] })), 400, {
      param: "messages[0].role",
    });
    assert.ok(role.text.length < 1000, `the error body is ${role.text.length} bytes`);
  });

  test("a NUL byte (or a control character) in the model is a 400 naming model", async () => {
    await expectError(await postChat(server, ok({ model: `${SMOLLM2}\u0000` })), 400, { param: "model" });
    await expectError(await postChat(server, ok({ model: "a\nb" })), 400, { param: "model" });
    await expectError(await postChat(server, ok({ user: "a\u0000" })), 400, { param: "user" });
  });

  test("a conversation with more messages than the context window is refused before it is rendered", async () => {
    const messages = Array.from({ length: 20_000 }, () => ({ role: "user", content: "a" }));
    const { error } = await expectError(await postChat(server, { model: SMOLLM2, messages, max_tokens: 2 }), 400, {
      param: "messages",
      code: "context_length_exceeded",
    });
    assert.match(error.message, /at least 20002 tokens/);
  });

  test("an absolute-form request URL goes through the same auth as any other", async () => {
    const body = "{not json";
    const reply = await rawExchange(
      server.url,
      `POST http://${host}/v1/compat/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      30_000,
    );
    assert.equal(reply.status, 401, reply.body);
    assert.equal(openAiError(reply.body)?.type, "authentication_error");
  });

  test("a key in the URL is refused, and never logged", async () => {
    const secret = `sk-in-url-${Date.now()}`;
    const response = await fetch(`${server.url}/v1/usage?api_key=${secret}`, { headers: { authorization: `Bearer ${server.key}` } });
    await expectError(response, 400, { code: "api_key_in_url" });
    await expectError(await fetch(`${server.url}/health?key=${secret}`), 400, { code: "api_key_in_url" });
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(server.logs().includes("/v1/usage"), "requests are logged at info with SWITCHYARD_ACCESS_LOG=info");
    assert.ok(!server.logs().includes(secret), "the key in the URL is not in the log");
  });

  test("errors from below the routes are in the OpenAI shape: bad Content-Length, missing Host", async () => {
    const badLength = await rawExchange(
      server.url,
      `POST /v1/compat/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Length: abc\r\n\r\n`,
      30_000,
    );
    assert.equal(badLength.status, 400);
    assert.ok(openAiError(badLength.body), badLength.body);
    const noHost = await rawExchange(server.url, "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", 30_000);
    assert.equal(noHost.status, 400);
    assert.equal(openAiError(noHost.body)?.code, "missing_host", noHost.body);
  });

  test("a body sent a byte at a time is cut off with a 408 in the OpenAI shape", async () => {
    const socket = await openSocket(server.url);
    socket.write(
      `POST /v1/compat/chat/completions HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${server.key}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`,
    );
    const drip = setInterval(() => socket.writable && socket.write(" "), 200);
    const started = Date.now();
    // Generous for a slow machine; without a request timeout the socket stays open for minutes.
    const reply = await readReply(socket, 60_000);
    clearInterval(drip);
    socket.destroy();
    assert.ok(reply.closed, `the server closed the dripping connection (after ${Date.now() - started} ms)`);
    assert.equal(reply.status, 408, JSON.stringify(reply).slice(0, 300));
    assert.equal(openAiError(reply.body)?.code, "request_timeout");
  });

  test("unauthenticated connections per IP are capped; the cap frees as they close", async () => {
    const idle: Socket[] = [];
    try {
      for (let i = 0; i < UNAUTH_CAP; i++) {
        const socket = await openSocket(server.url);
        socket.write(`POST /v1/compat/chat/completions HTTP/1.1\r\nHost: ${host}\r\n`); // headers never finished
        idle.push(socket);
      }
      await new Promise((r) => setTimeout(r, 300));
      const refused = await rawExchange(server.url, `GET /health HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, 30_000);
      assert.ok(refused.closed && refused.empty, `one connection over the cap is closed at once: ${JSON.stringify(refused)}`);
    } finally {
      for (const socket of idle) socket.destroy();
    }
    await new Promise((r) => setTimeout(r, 300));
    const health = await rawExchange(server.url, `GET /health HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, 30_000);
    assert.equal(health.status, 200);
  });

  test("a stream honours Connection: close", async () => {
    const body = JSON.stringify(ok({ stream: true, max_tokens: 3 }));
    const reply = await rawExchange(
      server.url,
      `POST /v1/compat/chat/completions HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${server.key}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      120_000,
    );
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.connection, "close");
    assert.match(reply.body, /data: \[DONE\]/);
    assert.ok(reply.closed, "the server closed the connection after the stream");
  });

  test("a compressed body is held to the body limit once inflated: a gzip bomb is a 413, a small gzip body is served", async () => {
    const post = (body: Uint8Array<ArrayBuffer>, encoding: string) =>
      fetch(`${server.url}/v1/compat/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json", "content-encoding": encoding },
        body: new Blob([body]),
      });
    // 64 MB of JSON whitespace inflates from about 64 KB on the wire, far under the limit (4 MB).
    const bomb = gzipSync(
      Buffer.concat([Buffer.from('{"model":"x","messages":['), Buffer.alloc(64 * 1024 * 1024, " "), Buffer.from("]}")]),
    );
    assert.ok(bomb.length < 1024 * 1024, `${bomb.length} bytes on the wire`);
    const refused = await post(bomb, "gzip");
    await expectError(refused, 413, {});
    const small = await post(gzipSync(JSON.stringify(ok())), "gzip");
    assert.equal(small.status, 200, (await small.clone().text()).slice(0, 300));
    assert.equal(((await small.json()) as { object: string }).object, "chat.completion");
  });

  test("after all of that the model still answers", async () => {
    const response = await postChat(server, ok({ max_tokens: 3 }));
    assert.equal(response.status, 200);
  });
});
