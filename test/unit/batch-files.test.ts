import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createAccount } from "../../src/accounts/key-store.js";
import { BATCH_ENDPOINTS } from "../../src/api/registry.js";
import { validateBatchFile } from "../../src/batches/validate.js";
import { resultFiles } from "../../src/batches/output-files.js";
import { createFileStore, FileCorrupted } from "../../src/storage/files.js";
import { forEachDatabase } from "../helpers/databases.js";

const CHAT_LINES = BATCH_ENDPOINTS.find((e) => e.url === "/v1/chat/completions")!;

forEachDatabase("the file store", ({ db }) => {
  test("keeps bytes exactly with their checksum, scoped to the account, and pages newest first", async () => {
    const files = createFileStore(db);
    const [mine, theirs] = [await createAccount(db, "files-a"), await createAccount(db, "files-b")];
    const bytes = Buffer.from([0x7b, 0x7d, 0x0a, 0x00, 0xff, 0xc3]); // not even UTF-8: stored as it came
    const first = await files.create(mine.id, { purpose: "batch", filename: "a.jsonl", content: bytes });
    const second = await files.create(mine.id, { purpose: "batch_output", filename: "b.jsonl", content: Buffer.from("x\n") });
    assert.deepEqual(await files.content(mine.id, first.id), bytes);
    assert.equal(await files.content(theirs.id, first.id), null);
    assert.equal(await files.get(theirs.id, first.id), null);
    assert.equal(await files.delete(theirs.id, first.id), false);
    assert.deepEqual(
      (await files.list(mine.id, { limit: 10, order: "desc" })).map((f) => f.id),
      [second.id, first.id],
    );
    assert.deepEqual(
      (await files.list(mine.id, { limit: 10, order: "desc", after: second.id })).map((f) => f.id),
      [first.id],
    );
    assert.deepEqual(
      (await files.list(mine.id, { limit: 10, order: "asc", purpose: "batch_output" })).map((f) => f.id),
      [second.id],
    );
    assert.deepEqual(await files.usage(mine.id), { files: 2, bytes: bytes.length + 2 });

    await db.query("UPDATE file_chunks SET content = $2 WHERE file_id = $1", [first.id, Buffer.from("tampered")]);
    await assert.rejects(files.content(mine.id, first.id), FileCorrupted);
    assert.equal(await files.delete(mine.id, first.id), true);
    assert.equal(await files.get(mine.id, first.id), null);
  });
});

describe("batch input validation", () => {
  const line = (customId: string, body: unknown = { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 5 }) =>
    JSON.stringify({ custom_id: customId, method: "POST", url: "/v1/chat/completions", body });

  test("valid lines become requests with their numbers; blank lines are skipped; tokens are estimated with the output cap", () => {
    const result = validateBatchFile(Buffer.from(`${line("a")}\n\n${line("b")}\n`), CHAT_LINES, 10);
    assert.ok(result.ok);
    assert.deepEqual(
      result.lines.map((l) => [l.line, l.customId]),
      [
        [1, "a"],
        [3, "b"],
      ],
    );
    assert.ok(result.lines[0]!.estimatedTokens > 5);
  });

  test("each bad line is reported with its number and reason", () => {
    const text = [
      line("a"),
      "[1]",
      line("a"),
      JSON.stringify({ custom_id: "s", method: "POST", url: "/v1/chat/completions", body: { model: "m", messages: [], stream: true } }),
      JSON.stringify({ custom_id: "g", method: "GET", url: "/v1/chat/completions", body: {} }),
    ].join("\n");
    const result = validateBatchFile(Buffer.from(text), CHAT_LINES, 10);
    assert.ok(!result.ok);
    assert.deepEqual(
      result.errors.map((e) => [e.line, e.code]),
      [
        [2, "invalid_request"],
        [3, "duplicate_custom_id"],
        [4, "invalid_value"],
        [5, "invalid_value"],
      ],
    );
    assert.match(result.errors[0]!.message, /^Line 2: /);
  });

  test("not UTF-8, empty, or more requests than the limit: the whole file is refused", () => {
    const bad = validateBatchFile(Buffer.from([0xff, 0xfe]), CHAT_LINES, 10);
    assert.ok(!bad.ok && bad.errors[0]!.code === "invalid_file_format");
    const empty = validateBatchFile(Buffer.from("\n\n"), CHAT_LINES, 10);
    assert.ok(!empty.ok && empty.errors[0]!.code === "empty_file");
    const many = validateBatchFile(Buffer.from([line("a"), line("b"), line("c")].join("\n")), CHAT_LINES, 2);
    assert.ok(!many.ok && many.errors[0]!.code === "too_many_requests");
  });

  test("results: 200 answers go to the output file, other answers and unrun lines to the error file, in input order", () => {
    const { output, errors } = resultFiles("batch_x", [
      { line: 1, custom_id: "a", request_id: "chatcmpl-1", status_code: 200, answer: '{"id":"chatcmpl-1"}', error: null },
      { line: 2, custom_id: "b", request_id: "chatcmpl-2", status_code: 400, answer: '{"error":{"message":"bad"}}', error: null },
      { line: 3, custom_id: "c", request_id: null, status_code: null, answer: null, error: '{"code":"batch_expired","message":"late"}' },
    ]);
    assert.deepEqual(output, [
      {
        id: "batch_req_x_1",
        custom_id: "a",
        response: { status_code: 200, request_id: "chatcmpl-1", body: { id: "chatcmpl-1" } },
        error: null,
      },
    ]);
    assert.deepEqual(
      errors.map((e) => [e.custom_id, e.response?.status_code ?? null, e.error?.code ?? null]),
      [
        ["b", 400, null],
        ["c", null, "batch_expired"],
      ],
    );
  });
});
