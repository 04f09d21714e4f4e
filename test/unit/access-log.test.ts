import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, test } from "node:test";
import { buildBaseApp } from "../../src/http/app.js";
import type { AccessLogLevel } from "../../src/observability/access-log.js";

/** The base app with a logger at `level` writing its JSON lines into `lines`, and one public route. */
async function appWith(level: string, accessLog?: AccessLogLevel) {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const app = buildBaseApp({
    authenticate: async () => null,
    bodyLimit: 1 << 20,
    logger: { level, stream },
    ...(accessLog ? { accessLog } : {}),
  });
  app.get("/ping", { config: { auth: "none" } }, async () => ({ ok: true }));
  await app.ready();
  return { app, lines };
}

describe("the access log", () => {
  test("by default it writes nothing at the default log level: Fastify's two lines per request are gone too", async () => {
    const { app, lines } = await appWith("info");
    assert.equal((await app.inject({ method: "GET", url: "/ping" })).statusCode, 200);
    await app.close();
    assert.deepEqual(
      lines.filter((l) => l.msg !== "Server listening"),
      [],
    );
  });

  test("at debug level it writes one line per request: method, path without the query, status, milliseconds, request id", async () => {
    const { app, lines } = await appWith("debug");
    assert.equal((await app.inject({ method: "GET", url: "/ping?note=secret-in-the-query" })).statusCode, 200);
    await app.close();
    const access = lines.filter((l) => l.msg === "request");
    assert.equal(access.length, 1);
    const [line] = access;
    assert.equal(line!.level, 20);
    assert.equal(line!.method, "GET");
    assert.equal(line!.url, "/ping?…", "the path, the query cut (http/auth.ts loggableUrl)");
    assert.equal(line!.statusCode, 200);
    assert.equal(typeof line!.ms, "number");
    assert.equal(typeof line!.reqId, "string");
    assert.ok(!JSON.stringify(lines).includes("secret-in-the-query"), "the query string is never logged");
  });

  test("SWITCHYARD_ACCESS_LOG=info writes the line at info; off writes none even at debug", async () => {
    const info = await appWith("info", "info");
    await info.app.inject({ method: "GET", url: "/ping" });
    await info.app.close();
    assert.deepEqual(
      info.lines.filter((l) => l.msg === "request").map((l) => l.level),
      [30],
    );
    const off = await appWith("debug", "off");
    await off.app.inject({ method: "GET", url: "/ping" });
    await off.app.close();
    assert.equal(off.lines.filter((l) => l.msg === "request" || l.msg === "request completed").length, 0);
  });
});
