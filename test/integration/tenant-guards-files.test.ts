import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import OpenAI, { toFile } from "openai";
import { createTestDatabase, type TestDatabase } from "../helpers/databases.js";
import { MINILM } from "../helpers/embeddings.js";
import { chatLine, resultLines, settled, upload } from "../helpers/batches.js";
import { adminKey, createKey, SMOLLM2, startServer, type RunningServer, emptyDataDir } from "../helpers/server.js";

const MAX_FILE = 1_500_000;
const QUOTA = 4_000_000;

/** A JSONL file of about `bytes` bytes, over many storage chunks, whose lines are all distinct. */
function bigJsonl(bytes: number): Buffer {
  const lines: string[] = [];
  for (let i = 0, size = 0; size < bytes; i++) {
    const line = chatLine(`line-${i}`, `Say ${i} ${"x".repeat(200)}`);
    lines.push(line);
    size += line.length + 1;
  }
  return Buffer.from(`${lines.join("\n")}\n`);
}

const sha = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

// Issue 30 items 1, 2 and 5: files stream through storage in chunks, uploads are requests under the
// key's limits and the account's byte quota, batch outputs count toward that quota, and no input
// leaves a batch stuck or answers a 500.
describe("files and batches against a hostile tenant: bounded, streamed, limited", () => {
  let database: TestDatabase;
  let server: RunningServer;
  let client: OpenAI;
  const env = () => ({
    SWITCHYARD_DATABASE_URL: database.url,
    SWITCHYARD_FILE_MAX_BYTES: String(MAX_FILE),
    SWITCHYARD_FILE_BYTES_PER_ACCOUNT: String(QUOTA),
  });
  const clientFor = (key: string) => new OpenAI({ apiKey: key, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
  before(async () => {
    database = await createTestDatabase("postgres");
    server = await startServer({ env: env(), models: [SMOLLM2, MINILM] });
    client = clientFor(server.key);
  });
  after(async () => {
    await server?.stop();
    await database?.dispose();
  });

  test("a file over many storage chunks comes back byte for byte, streamed, while /health keeps answering", async () => {
    const bytes = bigJsonl(1_200_000);
    let healthAnswers = 0;
    let uploading = true;
    const polling = (async () => {
      while (uploading) {
        if ((await fetch(`${server.url}/health`)).status === 200) healthAnswers++;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const file = await client.files.create({ file: await toFile(bytes, "big.jsonl"), purpose: "batch" });
    const back = Buffer.from(await (await client.files.content(file.id)).arrayBuffer());
    uploading = false;
    await polling;
    assert.equal(file.bytes, bytes.length);
    assert.equal(sha(back), sha(bytes));
    assert.ok(healthAnswers > 0, "/health answered during the upload and download");
    const chunks = await database.db.query<{ n: string }>("SELECT count(*)::text AS n FROM file_chunks WHERE file_id = $1", [file.id]);
    assert.ok(Number(chunks[0]!.n) >= 4, `stored in ${chunks[0]!.n} chunks`);
    await client.files.delete(file.id);
  });

  test("a file over the per-file limit is a 413, the quota a 429 naming its setting; neither leaves a file behind", async () => {
    const key = await adminKey(server, "quota-tenant");
    const tenant = clientFor(key);
    await assert.rejects(
      tenant.files.create({ file: await toFile(bigJsonl(MAX_FILE + 10_000), "too-big.jsonl"), purpose: "batch" }),
      (error: unknown) => error instanceof OpenAI.APIError && error.status === 413 && error.code === "file_too_large",
    );
    const kept = [];
    for (let i = 0; i < 2; i++)
      kept.push(await tenant.files.create({ file: await toFile(bigJsonl(MAX_FILE - 100_000), `part-${i}.jsonl`), purpose: "batch" }));
    const refused = await tenant.files
      .create({ file: await toFile(bigJsonl(MAX_FILE - 100_000), "over.jsonl"), purpose: "batch" })
      .catch((error: unknown) => error);
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
    assert.equal(refused.code, "file_storage_limit_exceeded");
    assert.match(refused.message, /SWITCHYARD_FILE_BYTES_PER_ACCOUNT/);
    const listed = await tenant.files.list();
    assert.deepEqual(listed.data.map((f) => f.id).sort(), kept.map((f) => f.id).sort(), "the refused uploads left nothing listed");
    const rows = await database.db.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM files WHERE filename IN ('too-big.jsonl', 'over.jsonl')",
    );
    assert.equal(rows[0]!.n, "0", "nor anything stored");
  });

  test("an upload is a request under the key's rate limit, and needs budget left", async () => {
    const paced = clientFor(await adminKey(server, "upload-paced", { rpm_limit: 2 }));
    await upload(paced, [chatLine("a", "Hi")]);
    await upload(paced, [chatLine("b", "Hi")]);
    await assert.rejects(upload(paced, [chatLine("c", "Hi")]), (error: unknown) => error instanceof OpenAI.RateLimitError);
    const broke = clientFor(await adminKey(server, "upload-broke", { budget_usd: "0" }));
    await assert.rejects(
      upload(broke, [chatLine("d", "Hi")]),
      (error: unknown) => error instanceof OpenAI.APIError && error.status === 402 && error.code === "insufficient_quota",
    );
  });

  test("a NUL in the file name is a 400, not a 500, and the client hears it while still sending the file", async () => {
    // The name arrives in the part's header, before the file: the server refuses with most of the body
    // still unsent, and reads the rest before answering, so the client is not cut off mid-write (EPIPE).
    for (const size of [64, 2 << 20]) {
      const form = new FormData();
      form.append("purpose", "batch");
      const line = `${chatLine("n", "Hi")}\n`;
      form.append("file", new Blob([line.repeat(Math.ceil(size / line.length))]), "bad\u0000name.jsonl");
      const response = await fetch(`${server.baseURL}/files`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.key}` },
        body: form,
      });
      assert.equal(response.status, 400, `a ${size}-byte file`);
      const body = (await response.json()) as { error: { code: string; param: string } };
      assert.equal(body.error.param, "file");
      assert.equal(response.headers.get("connection"), "keep-alive", "the body was read to its end, so the connection stays open");
    }
  });

  test("a line nested 200,000 deep fails its batch at validation naming the line; the batch does not stay validating", async () => {
    const deep = `{"custom_id":"deep","method":"POST","url":"/v1/chat/completions","body":{"model":"${SMOLLM2}","messages":[{"role":"user","content":"Hi"}],"extra":${"[".repeat(200_000)}${"]".repeat(200_000)}}}`;
    const input = await client.files.create({ file: await toFile(Buffer.from(`${deep}\n`), "deep.jsonl"), purpose: "batch" });
    const created = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const batch = await settled(client, created.id, 60_000);
    assert.equal(batch.status, "failed");
    const error = batch.errors?.data?.[0];
    assert.equal(error?.line, 1);
    assert.equal(error?.code, "nesting_too_deep");
    assert.match(error?.param ?? "", /^body\.extra/);
  });

  test("a batch whose output would pass the quota ends its remaining lines with file_storage_limit_exceeded, unbilled", async () => {
    const tenant = clientFor(await adminKey(server, "amplifier"));
    // Each line's answer: 600 vectors of 384 floats, over 2 MB of JSON (each float in at most nine
    // significant digits, about 11 bytes), so the second cannot fit the 4 MB quota.
    const inputs = Array.from({ length: 600 }, (_, i) => `word ${i}`);
    const line = (id: string) =>
      JSON.stringify({ custom_id: id, method: "POST", url: "/v1/embeddings", body: { model: MINILM, input: inputs } });
    const input = await upload(tenant, [line("e1"), line("e2"), line("e3")]);
    const created = await tenant.batches.create({ input_file_id: input.id, endpoint: "/v1/embeddings", completion_window: "24h" });
    const batch = await settled(tenant, created.id);
    assert.equal(batch.status, "completed");
    const errors = await resultLines(tenant, batch.error_file_id);
    const output = await resultLines(tenant, batch.output_file_id);
    assert.equal(output.length, 1, "the first answer fits");
    assert.equal(errors.length, 2, "the two after it do not");
    for (const refused of errors) assert.equal(refused.error?.code, "file_storage_limit_exceeded");
    const billed = await database.db.query<{ request_id: string }>(
      "SELECT request_id FROM usage_records WHERE batch_id = $1 AND cost_usd > 0",
      [batch.id],
    );
    assert.deepEqual(
      billed.map((r) => r.request_id).sort(),
      output.map((l) => l.response!.request_id).sort(),
      "only the kept answers are billed",
    );
    const usage = await database.db.query<{ bytes: string }>(
      "SELECT COALESCE(sum(bytes), 0)::text AS bytes FROM files f WHERE f.account_id = (SELECT account_id FROM batches WHERE id = $1)",
      [batch.id],
    );
    assert.ok(Number(usage[0]!.bytes) <= QUOTA, `the account keeps ${usage[0]!.bytes} bytes, within its quota`);
  });
});

describe("an upload cut off by kill -9 leaves nothing behind once the server is back (PGlite)", () => {
  test("its half-written chunks no longer count against the account's quota after the restart", async () => {
    const env = { SWITCHYARD_FILE_MAX_BYTES: String(MAX_FILE), SWITCHYARD_FILE_BYTES_PER_ACCOUNT: String(MAX_FILE + 200_000) };
    const dataDir = emptyDataDir("switchyard-upload-crash-");
    const key = createKey(dataDir, "uploader", [], env);
    let server = await startServer({ dataDir, key, env });
    try {
      // An upload that sends 1.2 MB of its file (several chunks stored) and then waits forever.
      const url = new URL(`${server.baseURL}/files`);
      const held = request({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "multipart/form-data; boundary=x", "content-length": 5_000_000 },
      });
      held.on("error", () => {});
      held.write(
        '--x\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--x\r\nContent-Disposition: form-data; name="file"; filename="held.jsonl"\r\n\r\n',
      );
      held.write(bigJsonl(1_200_000));
      await new Promise((resolve) => setTimeout(resolve, 3000));
      server.process.kill("SIGKILL");
      await server.stop();
      server = await startServer({ dataDir, key, env });
      const client = new OpenAI({ apiKey: key, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
      // With the cut-off upload still counted, 1.2 MB + 1.3 MB would pass the 1.7 MB quota.
      const file = await client.files.create({ file: await toFile(bigJsonl(1_300_000), "after.jsonl"), purpose: "batch" });
      assert.deepEqual(
        (await client.files.list()).data.map((f) => f.id),
        [file.id],
      );
    } finally {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
