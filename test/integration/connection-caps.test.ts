import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import type { Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { openAiError, openSocket, readReply, type RawReply } from "../helpers/raw-http.js";
import { adminKey, postChat, readSseTimed, SMOLLM2, SMOLLM2_NO_END, startServer, waitFor, type RunningServer } from "../helpers/server.js";

/**
 * Issue 30 item 3: one key opened ~19,850 kept-alive connections, each after one `GET /v1/models`,
 * until the process ran out of descriptors and other tenants' connections were reset. Each test
 * here replays that on a small scale against the real server, over raw sockets.
 */

/** The reply is whole: its headers, and as many body bytes as Content-Length says. */
const whole = (text: string) => {
  const split = text.indexOf("\r\n\r\n");
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, split));
  return split !== -1 && length !== null && Buffer.byteLength(text.slice(split + 4)) >= Number(length[1]);
};

/** Sends `GET path` on a kept-alive socket and reads its reply (the socket stays open unless the server closes it). */
function get(socket: Socket, path: string, key?: string): Promise<RawReply> {
  const auth = key ? `Authorization: Bearer ${key}\r\n` : "";
  return readReply(socket, 30_000, () => socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n${auth}\r\n`), whole);
}

/** Opens a connection and lists the models on it with `key`, leaving it open and idle, as the probe did. */
async function idleConnection(server: RunningServer, key: string): Promise<{ socket: Socket; reply: RawReply }> {
  const socket = await openSocket(server.url);
  socket.on("error", () => undefined);
  return { socket, reply: await get(socket, "/v1/models", key) };
}

/** Resolves true once the socket is closed, false if it is still open after `ms`. */
function closedWithin(socket: Socket, ms: number): Promise<boolean> {
  if (socket.destroyed) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

async function assertTooManyConnections({ socket, reply }: { socket: Socket; reply: RawReply }, what: RegExp): Promise<void> {
  assert.equal(reply.status, 429, reply.body);
  assert.equal(reply.headers.connection, "close");
  const error = openAiError(reply.body);
  assert.ok(error, reply.body);
  assert.equal(error.code, "too_many_connections");
  assert.equal(error.type, "rate_limit_error");
  assert.match(error.message, what);
  assert.equal(await closedWithin(socket, 20_000), true, "the connection over the cap is closed after its answer");
}

/** Another tenant's request on a fresh connection, and /health, are served. */
async function othersServed(server: RunningServer, otherKey: string): Promise<void> {
  const { socket, reply } = await idleConnection(server, otherKey);
  assert.equal(reply.status, 200, reply.body);
  socket.destroy();
  const health = await openSocket(server.url);
  assert.equal((await get(health, "/health")).status, 200);
  health.destroy();
}

const isOpen = (socket: Socket) => !socket.destroyed && !socket.readableEnded;

describe("connection caps per key and per account (issue 30 item 3)", () => {
  const PER_KEY = 8;
  const PER_ACCOUNT = 12;
  let server: RunningServer;
  let sameAccountKey = "";
  let otherKey = "";
  const held: Socket[] = [];
  before(async () => {
    server = await startServer({
      env: { SWITCHYARD_MAX_CONNECTIONS_PER_KEY: String(PER_KEY), SWITCHYARD_MAX_CONNECTIONS_PER_ACCOUNT: String(PER_ACCOUNT) },
    });
    sameAccountKey = await adminKey(server, "tester");
    otherKey = await adminKey(server, "other");
  });
  after(async () => {
    for (const socket of held) socket.destroy();
    await server?.stop();
  });

  test("a key's connections past its cap get 429 too_many_connections and are closed; others are served meanwhile", async () => {
    for (let i = 0; i < PER_KEY; i++) {
      const { socket, reply } = await idleConnection(server, server.key);
      assert.equal(reply.status, 200, reply.body);
      held.push(socket);
    }
    for (let i = 0; i < 2; i++) await assertTooManyConnections(await idleConnection(server, server.key), /this API key \(at most 8\)/);
    assert.ok(held.every(isOpen), "the connections within the cap stay open");
    // The held connections still serve their key: the cap counts connections, not requests.
    assert.equal((await get(held[0]!, "/v1/models", server.key)).status, 200);
    await othersServed(server, otherKey);
  });

  test("another key of the same account is capped by the account's total", async () => {
    for (let i = 0; i < PER_ACCOUNT - PER_KEY; i++) {
      const { socket, reply } = await idleConnection(server, sameAccountKey);
      assert.equal(reply.status, 200, reply.body);
      held.push(socket);
    }
    await assertTooManyConnections(await idleConnection(server, sameAccountKey), /this account's keys \(at most 12\)/);
    await othersServed(server, otherKey);
  });

  test("a connection keeps the key that first authenticated on it; closing one frees a place", async () => {
    // Another key's request on a connection the first key holds is served there, without moving it.
    assert.equal((await get(held[1]!, "/v1/models", otherKey)).status, 200);
    held.shift()!.destroy();
    const reopened = await waitFor(async () => {
      const attempt = await idleConnection(server, server.key);
      if (attempt.reply.status === 200) return attempt.socket;
      attempt.socket.destroy();
      return undefined;
    }, 30_000);
    held.push(reopened);
  });
});

describe("idle kept-alive connections (issue 30 item 3)", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({ env: { SWITCHYARD_KEEP_ALIVE_TIMEOUT_MS: "1000" } });
  });
  after(async () => {
    await server?.stop();
  });

  test("a connection idle past SWITCHYARD_KEEP_ALIVE_TIMEOUT_MS is closed by the server", async () => {
    const { socket, reply } = await idleConnection(server, server.key);
    assert.equal(reply.status, 200, reply.body);
    assert.match(reply.headers["keep-alive"] ?? "", /timeout=1\b/);
    // Generous for a slow machine, yet far below the 72 s default.
    assert.equal(await closedWithin(socket, 20_000), true, "the idle connection was not closed");
  });
});

/** Descriptors the process holds now. */
const openDescriptors = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

describe(
  "the total connection cap, below the descriptors (issue 30 item 3)",
  { skip: process.platform === "linux" ? false : "reads /proc and sets the server's limit with prlimit" },
  () => {
    const TOTAL = 40;
    const RESERVE = 8;
    let server: RunningServer;
    let keys: string[] = [];
    const held: Socket[] = [];
    before(async () => {
      server = await startServer({ env: { SWITCHYARD_MAX_CONNECTIONS: String(TOTAL), SWITCHYARD_CONNECTION_RESERVE: String(RESERVE) } });
      keys = [server.key, await adminKey(server, "second"), await adminKey(server, "newcomer")];
      // The descriptors it holds now, the total and some room: without a total cap, idle connections
      // would run the process out of descriptors, as the probe did with 20,000.
      const pid = server.process.pid!;
      const limit = openDescriptors(pid) + TOTAL + 30;
      execFileSync("prlimit", ["--pid", String(pid), `--nofile=${limit}:${limit}`]);
    });
    after(async () => {
      for (const socket of held) socket.destroy();
      await server?.stop();
    });

    test("full of idle connections, the oldest idle ones are closed: a new tenant and /health are served, a busy stream is not cut", async () => {
      // A stream that is running while the connections fill up: it is busy, so never the one closed.
      const stream = await postChat(server, {
        model: SMOLLM2,
        messages: [{ role: "user", content: "Count." }],
        stream: true,
        max_tokens: 200,
        logit_bias: SMOLLM2_NO_END,
      });
      assert.equal(stream.status, 200);
      let firstEvent!: () => void;
      const started = new Promise<void>((resolve) => (firstEvent = resolve));
      const events = readSseTimed(stream, () => firstEvent());
      await started;
      // Two tenants open idle connections, far more than the descriptors left allow.
      for (let i = 0; i < 2 * TOTAL; i++) {
        const { socket, reply } = await idleConnection(server, keys[i % 2]!);
        assert.ok(reply.status === 200 || reply.status === 429, `${reply.status} ${reply.body}`);
        held.push(socket);
      }
      const stillOpen = () => held.filter(isOpen);
      // Once the open connections reach the total less the reserve, each new one closes the longest idle.
      await waitFor(async () => (stillOpen().length <= TOTAL - RESERVE ? true : undefined), 30_000);
      // The longest idle went first: the first connections opened are gone, the last ones held.
      assert.ok(!isOpen(held[0]!), "the longest-idle connection was closed");
      assert.ok(isOpen(held.at(-1)!) || isOpen(held.at(-2)!), "the newest idle connections stay");
      for (let i = 0; i < 5; i++) await othersServed(server, keys[2]!);
      const streamed = await events;
      assert.equal(streamed.at(-1)?.data, "[DONE]", "the busy stream ran to its end");
      assert.match(server.logs(), /open-file limit \d+.*connections: 40 in all \(8 kept from keys\)/);
    });
  },
);
