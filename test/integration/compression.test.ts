import assert from "node:assert/strict";
import { networkInterfaces } from "node:os";
import { gunzipSync } from "node:zlib";
import { after, before, describe, test } from "node:test";
import { request } from "undici";
import { isLoopback } from "../../src/http/compression.js";
import { MINILM } from "../helpers/embeddings.js";
import { startServer, type RunningServer } from "../helpers/server.js";

/** This machine's first address that is not loopback: a peer the server sees as remote. */
function outsideAddress(): string | undefined {
  return Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === "IPv4" && !a.internal)?.address;
}

test("loopback peers are 127.0.0.0/8 and ::1, also IPv4-mapped; nothing else is", () => {
  for (const address of ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"]) assert.ok(isLoopback(address), address);
  for (const address of [undefined, "", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1", "1.2.7.127", "::"])
    assert.ok(!isLoopback(address), address);
});

describe("SWITCHYARD_COMPRESSION auto (the default): a large JSON answer is compressed for a remote peer, never for a loopback one", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({ models: [MINILM], env: { SWITCHYARD_HOST: "0.0.0.0" } });
  });
  after(async () => {
    await server?.stop();
  });

  /** Eight embeddings: about 66 KB of JSON, over the 32 KiB threshold. */
  const embed = async (host: string) => {
    const port = new URL(server.url).port;
    const res = await request(`http://${host}:${port}/v1/embeddings`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json", "accept-encoding": "gzip" },
      body: JSON.stringify({ model: MINILM, input: Array.from({ length: 8 }, (_, i) => `sentence number ${i}`) }),
    });
    const bytes = Buffer.from(await res.body.arrayBuffer());
    const encoding = res.headers["content-encoding"];
    const text = (encoding === "gzip" ? gunzipSync(bytes) : bytes).toString("utf8");
    assert.equal(res.statusCode, 200);
    assert.ok(text.length > 32 * 1024, `a ${text.length}-byte body`);
    assert.equal(JSON.parse(text).data.length, 8);
    return encoding;
  };

  test("a loopback peer gets the answer as it is, though it accepts gzip", async () => {
    assert.equal(await embed("127.0.0.1"), undefined);
  });

  test("a peer on another address gets it gzipped", async (t) => {
    const address = outsideAddress();
    if (!address) return t.skip("this machine has no address but loopback");
    assert.equal(await embed(address), "gzip");
  });
});
