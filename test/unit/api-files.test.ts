/**
 * The Files and Batch API endpoints as plain functions (api/files/, api/batches/): `run(caller,
 * input)` on the real batch service and file store over an in-process database; no Fastify, socket
 * or model. The form a client uploads is handed in as its parts (protocol/form-parts.ts). Batch
 * lines running is the runner's business (batch-runner.test.ts, test/integration/batches*.test.ts).
 */
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { after, before, describe, test } from "node:test";
import { createKey } from "../../src/accounts/key-store.js";
import { authenticate } from "../../src/accounts/principals.js";
import { batchEndpoints } from "../../src/api/batches/endpoints.js";
import type { Endpoint, EndpointAnswer, EndpointInput } from "../../src/api/endpoint.js";
import { fileEndpoints } from "../../src/api/files/endpoints.js";
import { BATCH_ENDPOINTS } from "../../src/api/registry.js";
import type { BatchLimits } from "../../src/batches/limits.js";
import { createBatchService } from "../../src/batches/service.js";
import { ServiceError } from "../../src/errors.js";
import type { FormPart } from "../../src/protocol/form-parts.js";
import type { Principal } from "../../src/protocol/principal.js";
import type { Database } from "../../src/storage/database.js";
import { createFileStore } from "../../src/storage/files.js";
import { openDatabase } from "../../src/storage/open.js";
import { migratedDataDir } from "../helpers/databases.js";

const LIMITS: BatchLimits = {
  maxFileBytes: 4096,
  maxRequests: 100,
  filesPerAccount: 100,
  fileBytesPerAccount: 1 << 20,
  enqueuedTokensPerAccount: 1_000_000,
  activeBatchesPerAccount: 10,
  uploadsPerAccount: 2,
  uploadsInFlight: 4,
};

const refusal = (status: number, code: string) => (error: unknown) =>
  error instanceof ServiceError && error.status === status && error.code === code;
const jsonOf = (answer: EndpointAnswer): any => {
  assert.equal(answer.type, "json");
  return (answer as { value: unknown }).value;
};

/** The parts of a form as the HTTP layer hands them in: `purpose`, then the file's bytes in two chunks. */
async function* form(text: string, purpose = "batch"): AsyncGenerator<FormPart> {
  yield { field: "purpose", value: purpose };
  const bytes = Buffer.from(text);
  yield {
    file: "file",
    filename: "input.jsonl",
    bytes: (async function* () {
      yield bytes.subarray(0, 5);
      yield bytes.subarray(5);
    })(),
  };
}

const chatLine = (id: string) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: "m", messages: [{ role: "user", content: "hi" }] },
  });

describe("the Files and Batch APIs as plain functions", () => {
  let dataDir: string;
  let db: Database;
  let files: Map<string, Endpoint>;
  let batches: Map<string, Endpoint>;
  let mine: Principal;
  let theirs: Principal;
  let woken = 0;
  const call = (endpoints: Map<string, Endpoint>, id: string, caller: Principal, input: Partial<EndpointInput<any, any, any>> = {}) =>
    endpoints.get(id)!.run(caller, { params: {}, query: {}, body: undefined, ...input });
  const upload = async (caller: Principal, text: string) => jsonOf(await call(files, "createFile", caller, { body: form(text) }));

  before(async () => {
    dataDir = await migratedDataDir("switchyard-api-files-");
    db = await openDatabase({ dataDir });
    const store = createFileStore(db);
    const service = createBatchService({
      db,
      endpoints: BATCH_ENDPOINTS,
      files: store,
      limits: LIMITS,
      ownerId: "owner-test",
      wake: () => void woken++,
      admitUpload: async () => {},
    });
    files = new Map(fileEndpoints(service, store).map((e) => [e.id, e]));
    batches = new Map(
      batchEndpoints(
        service,
        BATCH_ENDPOINTS.map((b) => b.url),
      ).map((e) => [e.id, e]),
    );
    const principal = async (key: { key: string }) => (await authenticate(db, key.key))!;
    mine = await principal(await createKey(db, { account: "files-a", name: "app" }));
    theirs = await principal(await createKey(db, { account: "files-b", name: "app" }));
  });
  after(async () => {
    await db.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  test("files: an upload's parts are stored, listed, read back byte for byte and deleted; another account's file is a 404", async () => {
    const text = `${chatLine("a")}\n${chatLine("b")}\n`;
    const file = await upload(mine, text);
    assert.equal(file.object, "file");
    assert.equal(file.bytes, Buffer.byteLength(text));
    assert.equal(file.purpose, "batch");
    const list = files.get("listFiles")!;
    const listed = jsonOf(await call(files, "listFiles", mine, { query: list.parseQuery!({}) }));
    assert.equal(listed.object, "list");
    assert.deepEqual(
      listed.data.map((f: any) => f.id),
      [file.id],
    );
    assert.deepEqual(jsonOf(await call(files, "listFiles", theirs, { query: list.parseQuery!({}) })).data, []);
    assert.equal(jsonOf(await call(files, "retrieveFile", mine, { params: { id: file.id } })).filename, "input.jsonl");
    await assert.rejects(call(files, "retrieveFile", theirs, { params: { id: file.id } }), refusal(404, "not_found"));

    const content = await call(files, "downloadFile", mine, { params: { id: file.id } });
    assert.equal(content.type, "bytes");
    if (content.type !== "bytes") return;
    assert.equal(content.contentType, "application/octet-stream");
    assert.equal(content.length, Buffer.byteLength(text));
    const chunks: Buffer[] = [];
    for await (const chunk of content.chunks) chunks.push(chunk);
    assert.equal(Buffer.concat(chunks).toString(), text);

    await assert.rejects(call(files, "deleteFile", theirs, { params: { id: file.id } }), refusal(404, "not_found"));
    assert.deepEqual(jsonOf(await call(files, "deleteFile", mine, { params: { id: file.id } })), {
      id: file.id,
      object: "file",
      deleted: true,
    });
    await assert.rejects(call(files, "downloadFile", mine, { params: { id: file.id } }), refusal(404, "not_found"));
  });

  test("files: the query is parsed by the declaration; an unknown cursor, a wrong purpose and a file over the limit are refused", async () => {
    const list = files.get("listFiles")!;
    assert.throws(
      () => list.parseQuery!({ limit: "0" }),
      (e) => e instanceof ServiceError && e.status === 400,
    );
    assert.throws(
      () => list.parseQuery!({ bogus: "1" }),
      (e) => e instanceof ServiceError && e.status === 400,
    );
    await assert.rejects(
      call(files, "listFiles", mine, { query: list.parseQuery!({ after: "file-nope" }) }),
      (e) => e instanceof ServiceError && e.status === 400,
    );
    await assert.rejects(call(files, "createFile", mine, { body: form(chatLine("a"), "fine-tune") }), refusal(400, "invalid_value"));
    await assert.rejects(
      call(files, "createFile", mine, { body: form("x".repeat(LIMITS.maxFileBytes + 1)) }),
      refusal(413, "file_too_large"),
    );
  });

  test("batches: created from an uploaded file (validated at once), listed newest first, retrieved and cancelled; another account's is a 404", async () => {
    const file = await upload(mine, `${chatLine("a")}\n${chatLine("b")}\n`);
    const before = woken;
    const body = { input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { run: "1" } };
    const batch = jsonOf(await call(batches, "createBatch", mine, { body }));
    assert.equal(batch.object, "batch");
    assert.equal(batch.status, "in_progress");
    assert.equal(batch.request_counts.total, 2);
    assert.deepEqual(batch.metadata, { run: "1" });
    assert.ok(woken > before, "the runner is woken");
    const second = jsonOf(await call(batches, "createBatch", mine, { body: { ...body, metadata: undefined } }));
    const list = batches.get("listBatches")!;
    const listed = jsonOf(await call(batches, "listBatches", mine, { query: list.parseQuery!({}) }));
    assert.deepEqual(
      listed.data.map((b: any) => b.id),
      [second.id, batch.id],
    );
    const page = jsonOf(await call(batches, "listBatches", mine, { query: list.parseQuery!({ after: second.id, limit: "1" }) }));
    assert.deepEqual([page.data.map((b: any) => b.id), page.has_more], [[batch.id], false]);
    await assert.rejects(
      call(batches, "listBatches", mine, { query: list.parseQuery!({ after: "batch_nope" }) }),
      (e) => e instanceof ServiceError && e.status === 400,
    );
    assert.equal(jsonOf(await call(batches, "retrieveBatch", mine, { params: { id: batch.id } })).id, batch.id);
    await assert.rejects(call(batches, "retrieveBatch", theirs, { params: { id: batch.id } }), refusal(404, "not_found"));
    await assert.rejects(call(batches, "cancelBatch", theirs, { params: { id: batch.id } }), refusal(404, "not_found"));
    assert.equal(jsonOf(await call(batches, "cancelBatch", mine, { params: { id: batch.id } })).status, "cancelling");
  });

  test("batches: an endpoint not among the batchable declarations is a 400 naming them; a bad file fails the batch with each line's error", async () => {
    const file = await upload(mine, `${chatLine("a")}\nnot json\n`);
    const body = { input_file_id: file.id, endpoint: "/v1/models", completion_window: "24h" };
    await assert.rejects(call(batches, "createBatch", mine, { body }), (e) => {
      assert.ok(e instanceof ServiceError && e.status === 400 && e.param === "endpoint");
      assert.match(e.message, new RegExp(BATCH_ENDPOINTS.map((b) => b.url).join(", ")));
      return true;
    });
    const failed = jsonOf(await call(batches, "createBatch", mine, { body: { ...body, endpoint: "/v1/chat/completions" } }));
    assert.equal(failed.status, "failed");
    assert.deepEqual(
      failed.errors.data.map((e: any) => [e.line, e.code]),
      [[2, "invalid_json_line"]],
    );
  });
});
