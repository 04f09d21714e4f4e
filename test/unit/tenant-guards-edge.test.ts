import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getEventListeners } from "node:events";
import { describe, test } from "node:test";
import Fastify from "fastify";
import { makePrivate } from "../../src/config/data-dir-permissions.js";
import { createDrain, shutdownSignalOf } from "../../src/http/drain.js";
import { abortOnDisconnect } from "../../src/http/runs.js";
import { installJsonBodyParser, installPathParamCheck } from "../../src/http/edge-input.js";
import { findBodyFault } from "../../src/protocol/body-faults.js";
import { installErrorHandlers } from "../../src/http/errors.js";

/** Issue 20: the pure parts of the edge guards, data dir modes and the drain. */
describe("edge input (issue 20 items 4, 5)", () => {
  test("findBodyFault names the first lone surrogate's parameter path, keys included", () => {
    const paramOf = (body: unknown, maxDepth?: number) => findBodyFault(body, maxDepth)?.param ?? null;
    assert.equal(paramOf({ input: "a\ud800b" }), "input");
    assert.equal(
      paramOf({
        messages: [
          { role: "user", content: "ok" },
          { role: "user", content: "\udc00" },
        ],
      }),
      "messages[1].content",
    );
    assert.equal(paramOf({ metadata: { "k\ud800": "v" } }), "metadata");
    assert.equal(paramOf({ input: "a pair is fine: \ud83d\ude00", n: 1, x: null }), null);
    // A body nested thousands of levels deep is walked without recursion (it used to overflow into a 400 invalid_json).
    let deep: unknown = "leaf \ud800";
    for (let i = 0; i < 20_000; i++) deep = { a: deep };
    assert.equal(paramOf(deep), `${"a.".repeat(19_999)}a`);
    // With a bound, the nesting itself is the fault, named by its first two steps.
    assert.deepEqual(findBodyFault(deep, 128), {
      param: "a.a",
      code: "nesting_too_deep",
      message: "Invalid 'a.a': objects and arrays are nested more than 128 levels deep.",
    });
  });

  test("findBodyFault: NUL in a value or a key, prototype keys, and exactly maxDepth levels", () => {
    assert.deepEqual(findBodyFault({ metadata: { a: "x\u0000" } }), {
      param: "metadata.a",
      code: "invalid_value",
      message: "Invalid 'metadata.a': the text holds a NUL character (\\u0000), which no stored text can hold.",
    });
    assert.equal(findBodyFault({ metadata: { "a\u0000": "x" } })?.param, "metadata");
    assert.equal(findBodyFault(JSON.parse('{"metadata":{"__proto__":"x"}}'))?.param, "metadata");
    assert.match(findBodyFault(JSON.parse('{"__proto__":{"x":1}}'))!.message, /Invalid 'body': the key '__proto__' is not accepted/);
    assert.equal(findBodyFault({ tools: [{ constructor: { prototype: {} } }] })?.param, "tools[0]");
    assert.equal(findBodyFault({ metadata: { constructor: "x", proto: "y" } }), null);
    const nested = (levels: number) => JSON.parse("[".repeat(levels) + "]".repeat(levels)) as unknown;
    assert.equal(findBodyFault(nested(16), 16), null);
    assert.equal(findBodyFault(nested(17), 16)?.param, "[0][0]");
  });

  function app() {
    const server = Fastify();
    installErrorHandlers(server);
    installJsonBodyParser(server);
    installPathParamCheck(server);
    server.delete("/things/:id", async (request) => ({ id: (request.params as { id: string }).id, body: request.body ?? "none" }));
    server.post("/things", async (request) => ({ body: request.body ?? "none" }));
    return server;
  }

  test("an empty body with Content-Type: application/json is no body; bad JSON and lone surrogates are 400s in the OpenAI shape", async () => {
    const server = app();
    const headers = { "content-type": "application/json" };
    const empty = await server.inject({ method: "DELETE", url: "/things/t1", headers, payload: "" });
    assert.deepEqual(empty.json(), { id: "t1", body: "none" });
    assert.deepEqual((await server.inject({ method: "POST", url: "/things", headers, payload: '{"a":1}' })).json(), { body: { a: 1 } });
    const broken = await server.inject({ method: "POST", url: "/things", headers, payload: "{" });
    assert.equal(broken.statusCode, 400);
    assert.equal(broken.json().error.code, "invalid_json");
    const poisoned = await server.inject({ method: "POST", url: "/things", headers, payload: '{"__proto__":{"x":1}}' });
    assert.equal(poisoned.statusCode, 400);
    const surrogate = await server.inject({ method: "POST", url: "/things", headers, payload: '{"input":"a\\ud800b"}' });
    assert.equal(surrogate.statusCode, 400);
    assert.deepEqual(
      { ...surrogate.json().error, message: undefined },
      { message: undefined, type: "invalid_request_error", param: "input", code: "invalid_unicode" },
    );
    await server.close();
  });

  test("a path parameter holding a NUL or another control character is a 404 before the handler runs", async () => {
    const server = app();
    for (const id of ["%00", "a%0Ab", "%7F"]) {
      const response = await server.inject({ method: "DELETE", url: `/things/${id}` });
      assert.equal(response.statusCode, 404, id);
      assert.equal(response.json().error.code, "not_found");
    }
    await server.close();
  });
});

describe("data dir modes (issue 20 item 7)", () => {
  test("makePrivate makes dirs 0700 and files 0600 all the way down, leaves symlinks alone, and counts what it changed", () => {
    const root = mkdtempSync(join(tmpdir(), "switchyard-private-"));
    try {
      mkdirSync(join(root, "db/base"), { recursive: true });
      writeFileSync(join(root, "db/base/1"), "x");
      writeFileSync(join(root, "server.json"), "{}");
      const outside = join(root, "..", `outside-${process.pid}`);
      writeFileSync(outside, "x");
      chmodSync(outside, 0o644);
      symlinkSync(outside, join(root, "link"));
      for (const path of ["db", "db/base"]) chmodSync(join(root, path), 0o777);
      for (const path of ["db/base/1", "server.json"]) chmodSync(join(root, path), 0o666);
      chmodSync(root, 0o755);
      assert.equal(makePrivate(root), 5);
      for (const path of ["", "db", "db/base"]) assert.equal(statSync(join(root, path)).mode & 0o777, 0o700, path);
      for (const path of ["db/base/1", "server.json"]) assert.equal(statSync(join(root, path)).mode & 0o777, 0o600, path);
      assert.equal(statSync(outside).mode & 0o777, 0o644, "a symlink's target outside is not touched");
      assert.equal(makePrivate(root), 0);
      rmSync(outside);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("drain (issue 20 item 9)", () => {
  test("while draining, new requests get the 503 server_shutting_down body and /health still answers; drain() resolves once idle", async () => {
    const drain = createDrain();
    const server = Fastify();
    installErrorHandlers(server);
    drain.install(server);
    server.get("/health", async () => ({ status: drain.draining ? "draining" : "ok" }));
    server.get("/work", async () => ({ ok: true }));
    assert.equal((await server.inject({ url: "/work" })).statusCode, 200);
    assert.equal(drain.inFlight, 0);
    await drain.drain(1_000);
    const refused = await server.inject({ url: "/work" });
    assert.equal(refused.statusCode, 503);
    assert.equal(refused.json().error.code, "server_shutting_down");
    assert.equal(refused.headers["retry-after"], "5");
    assert.deepEqual((await server.inject({ url: "/health" })).json(), { status: "draining" });
    await server.close();
  });

  test("a finished request leaves no listener on the server-wide shutdown signal (each one used to stay, holding its request's state)", async () => {
    const drain = createDrain();
    const server = Fastify();
    installErrorHandlers(server);
    drain.install(server);
    let shutdown: AbortSignal | undefined;
    server.get("/work", async (request, reply) => {
      shutdown = shutdownSignalOf(request);
      abortOnDisconnect(reply);
      return { ok: true };
    });
    for (let i = 0; i < 20; i++) assert.equal((await server.inject({ url: "/work" })).statusCode, 200);
    assert.ok(shutdown);
    assert.equal(getEventListeners(shutdown, "abort").length, 0);
    await server.close();
  });
});
