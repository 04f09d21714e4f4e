import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import OpenAI, { toFile } from "openai";
import { BATCH_PRICES, chatLine, resultLines, settled, upload } from "../helpers/batches.js";
import { requestCost } from "../../src/billing/cost.js";
import { createTestDatabase, type TestDatabase } from "../helpers/databases.js";
import { MINILM } from "../helpers/embeddings.js";
import { adminKey, cli, SMOLLM2, startServer, waitFor, type RunningServer } from "../helpers/server.js";

const ENQUEUED_TOKEN_CAP = 3000;

describe("the Files and Batch APIs through the official client, on the real model and PostgreSQL", () => {
  let database: TestDatabase;
  let server: RunningServer;
  let client: OpenAI;
  let stranger: OpenAI;
  before(async () => {
    database = await createTestDatabase("postgres");
    const env = {
      SWITCHYARD_DATABASE_URL: database.url,
      SWITCHYARD_BATCH_ENQUEUED_TOKENS: String(ENQUEUED_TOKEN_CAP),
      SWITCHYARD_UPLOADS_PER_ACCOUNT: "1",
    };
    server = await startServer({ env, models: [SMOLLM2, MINILM] });
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
    stranger = new OpenAI({
      apiKey: await adminKey(server, "stranger"),
      baseURL: server.baseURL,
      timeout: 180_000,
      maxRetries: 0,
    });
  });
  after(async () => {
    await server?.stop();
    await database?.dispose();
  });

  test("files: upload, retrieve, list, content (checksummed bytes back), delete; another account sees none of it", async () => {
    const lines = [chatLine("a", "Hi")];
    const file = await upload(client, lines, "mine.jsonl");
    assert.match(file.id, /^file-/);
    assert.equal(file.object, "file");
    assert.equal(file.purpose, "batch");
    assert.equal(file.filename, "mine.jsonl");
    assert.equal(file.bytes, Buffer.byteLength(`${lines[0]}\n`));
    assert.equal((await client.files.retrieve(file.id)).id, file.id);
    const listed = await client.files.list({ purpose: "batch" });
    assert.ok(listed.data.some((f) => f.id === file.id));
    assert.equal(await (await client.files.content(file.id)).text(), `${lines[0]}\n`);
    const [row] = await database.db.query<{ sha256: string }>("SELECT sha256 FROM files WHERE id = $1", [file.id]);
    assert.match(row!.sha256, /^[0-9a-f]{64}$/);

    await assert.rejects(stranger.files.retrieve(file.id), (error: unknown) => error instanceof OpenAI.NotFoundError);
    await assert.rejects(stranger.files.content(file.id), (error: unknown) => error instanceof OpenAI.NotFoundError);
    await assert.rejects(
      stranger.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
      (error: unknown) => error instanceof OpenAI.NotFoundError,
    );
    assert.ok(!(await stranger.files.list()).data.some((f) => f.id === file.id));
    await assert.rejects(stranger.files.delete(file.id), (error: unknown) => error instanceof OpenAI.NotFoundError);

    assert.deepEqual(await client.files.delete(file.id), { id: file.id, object: "file", deleted: true });
    await assert.rejects(client.files.retrieve(file.id), (error: unknown) => error instanceof OpenAI.NotFoundError);
  });

  test("an account reads one upload at a time (its cap here): a second is a 429 while another account's goes through; a dropped upload frees its slot", async () => {
    const url = new URL(`${server.baseURL}/files`);
    // An upload that never finishes. It races the probes below for the account's one slot: when a
    // probe wins (the held request is then answered 429), it is sent again.
    const holdUpload = () => {
      const req = request({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        headers: { authorization: `Bearer ${server.key}`, "content-type": "multipart/form-data; boundary=x", "content-length": 1_000_000 },
      });
      const state = { req, answered: false };
      req.on("error", () => {});
      req.on("response", (response) => {
        state.answered = true;
        response.resume();
      });
      req.write('--x\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n');
      return state;
    };
    let held = holdUpload();
    const refused = await waitFor(async () => {
      if (held.answered) {
        held = holdUpload();
        return undefined;
      }
      try {
        await upload(client, [chatLine("second", "Hi")]);
        return undefined;
      } catch (error) {
        return error;
      }
    }, 60_000);
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
    assert.equal(refused.code, "too_many_uploads");
    assert.match((await upload(stranger, [chatLine("theirs", "Hi")])).id, /^file-/, "another account's upload is not held up");
    held.req.destroy();
    const after = await waitFor(async () => upload(client, [chatLine("third", "Hi")]).catch(() => undefined), 60_000);
    assert.match(after.id, /^file-/, "the dropped upload's slot is free again");
  });

  test("a purpose other than batch, and a body that is not multipart, are 400s in the OpenAI shape", async () => {
    await assert.rejects(
      client.files.create({ file: await toFile(Buffer.from("x"), "x.txt"), purpose: "assistants" }),
      (error: unknown) => error instanceof OpenAI.BadRequestError && error.param === "purpose",
    );
    const response = await fetch(`${server.baseURL}/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(response.status, 400);
    const body = (await response.json()) as { error: { message: string; type: string; param: string | null; code: string | null } };
    assert.equal(body.error.type, "invalid_request_error");
  });

  test("a batch runs each line once at the batch price: output file in OpenAI's format, ledger rows with the batch id", async () => {
    const prompts = ["Say hello.", "Name a colour.", "Count to three."];
    const input = await upload(
      client,
      prompts.map((p, i) => chatLine(`req-${i}`, p)),
    );
    const created = await client.batches.create({
      input_file_id: input.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { job: "greetings" },
    });
    assert.match(created.id, /^batch_/);
    assert.equal(created.object, "batch");
    assert.ok(["validating", "in_progress", "finalizing", "completed"].includes(created.status), created.status);
    assert.deepEqual(created.metadata, { job: "greetings" });
    assert.equal(created.request_counts?.total, 3);

    const batch = await settled(client, created.id);
    assert.equal(batch.status, "completed");
    assert.deepEqual(batch.request_counts, { total: 3, completed: 3, failed: 0 });
    for (const stamp of ["created_at", "in_progress_at", "finalizing_at", "completed_at", "expires_at"] as const)
      assert.equal(typeof batch[stamp], "number", stamp);
    assert.equal(batch.error_file_id, null);
    const output = await resultLines(client, batch.output_file_id);
    assert.deepEqual(output.map((l) => l.custom_id).sort(), ["req-0", "req-1", "req-2"]);
    for (const line of output) {
      assert.match(line.id, /^batch_req_/);
      assert.equal(line.error, null);
      assert.equal(line.response!.status_code, 200);
      assert.equal(line.response!.body.object, "chat.completion");
      assert.equal(line.response!.body.service_tier, "batch");
      assert.equal(line.response!.request_id, line.response!.body.id);
    }
    const output2 = await client.files.retrieve(batch.output_file_id!);
    assert.equal(output2.purpose, "batch_output");

    const rows = await database.db.query<{
      request_id: string;
      service_tier: string;
      status: string;
      cost_usd: string;
      prompt_tokens: number;
      cached_tokens: number;
      completion_tokens: number;
    }>(
      "SELECT request_id, service_tier, status, cost_usd::text AS cost_usd, prompt_tokens, cached_tokens, completion_tokens FROM usage_records WHERE batch_id = $1 AND cost_usd > 0",
      [batch.id],
    );
    assert.deepEqual(
      rows.map((r) => r.request_id).sort(),
      output.map((l) => l.response!.request_id).sort(),
      "each answered line is billed once, and only those",
    );
    for (const row of rows) {
      assert.equal(row.service_tier, "batch");
      assert.equal(row.status, "completed");
      const exact = requestCost(BATCH_PRICES, {
        promptTokens: row.prompt_tokens,
        cachedPromptTokens: row.cached_tokens,
        completionTokens: row.completion_tokens,
      });
      assert.equal(Number(row.cost_usd), Number(exact));
    }
  });

  test("/models shows the batch multiplier, 0.5 by default", async () => {
    const response = await fetch(`${server.baseURL}/models/${SMOLLM2}`, { headers: { authorization: `Bearer ${server.key}` } });
    const model = (await response.json()) as {
      metadata: { pricing: { tiers: { batch: { multiplier: number; input: number; output: number } } } };
    };
    assert.equal(model.metadata.pricing.tiers.batch.multiplier, 0.5);
    assert.equal(model.metadata.pricing.tiers.batch.input, 0.01);
    assert.equal(model.metadata.pricing.tiers.batch.output, 0.03);
  });

  test("a file with bad lines fails the batch at validation, with an error file naming each line and why", async () => {
    const lines = [
      chatLine("ok-1", "Hi"),
      "{not json",
      chatLine("ok-1", "a duplicate custom_id"),
      JSON.stringify({ custom_id: "wrong-url", method: "POST", url: "/v1/completions", body: { model: SMOLLM2, prompt: "x" } }),
      JSON.stringify({
        custom_id: "bad-body",
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: SMOLLM2, messages: "not a list" },
      }),
    ];
    const input = await upload(client, lines);
    const batch = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    assert.equal(batch.status, "failed");
    assert.equal(typeof batch.failed_at, "number");
    const errors = batch.errors!.data!;
    assert.deepEqual(
      errors.map((e) => e.line),
      [2, 3, 4, 5],
    );
    assert.deepEqual(
      errors.map((e) => e.code),
      ["invalid_json_line", "duplicate_custom_id", "mismatched_url", "invalid_request"],
    );
    assert.equal(errors[3]!.param, "body.messages");
    const errorFile = await resultLines(client, batch.error_file_id);
    assert.deepEqual(
      errorFile.map((l) => l.error!.line),
      [2, 3, 4, 5],
    );
    assert.ok(errorFile.every((l) => l.response === null && l.error!.message.startsWith(`Line ${l.error!.line}:`)));
    const [{ n }] = (await database.db.query<{ n: string }>("SELECT count(*) AS n FROM usage_records WHERE batch_id = $1", [batch.id])) as [
      { n: string },
    ];
    assert.equal(Number(n), 0, "nothing ran, nothing billed");
  });

  test("an unknown endpoint, window or file is a 400/404 at create", async () => {
    const input = await upload(client, [chatLine("x", "Hi")]);
    await assert.rejects(
      client.batches.create({ input_file_id: input.id, endpoint: "/v1/moderations" as "/v1/embeddings", completion_window: "24h" }),
      (error: unknown) => error instanceof OpenAI.BadRequestError && error.param === "endpoint",
    );
    await assert.rejects(
      client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "48h" as "24h" }),
      (error: unknown) => error instanceof OpenAI.BadRequestError && error.param === "completion_window",
    );
    await assert.rejects(
      client.batches.create({ input_file_id: "file-nope", endpoint: "/v1/chat/completions", completion_window: "24h" }),
      (error: unknown) => error instanceof OpenAI.NotFoundError,
    );
  });

  test("past the account's enqueued-token cap a batch fails with token_limit_exceeded, naming the figures", async () => {
    const input = await upload(client, [chatLine("big-1", "Hi", ENQUEUED_TOKEN_CAP), chatLine("big-2", "Hi", 10)]);
    const batch = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    assert.equal(batch.status, "failed");
    assert.equal(batch.errors!.data![0]!.code, "token_limit_exceeded");
    assert.match(batch.errors!.data![0]!.message!, new RegExp(`limit is ${ENQUEUED_TOKEN_CAP}`));
  });

  test("the Responses and legacy completions endpoints run as batches too", async () => {
    const responses = await upload(client, [
      JSON.stringify({
        custom_id: "r1",
        method: "POST",
        url: "/v1/responses",
        body: { model: SMOLLM2, input: "Say hi.", max_output_tokens: 8 },
      }),
    ]);
    const completions = await upload(client, [
      JSON.stringify({
        custom_id: "c1",
        method: "POST",
        url: "/v1/completions",
        body: { model: SMOLLM2, prompt: "Once upon", max_tokens: 8 },
      }),
    ]);
    const [a, b] = await Promise.all([
      client.batches.create({ input_file_id: responses.id, endpoint: "/v1/responses", completion_window: "24h" }),
      client.batches.create({ input_file_id: completions.id, endpoint: "/v1/completions", completion_window: "24h" }),
    ]);
    const [doneA, doneB] = await Promise.all([settled(client, a.id), settled(client, b.id)]);
    for (const [done, object] of [
      [doneA, "response"],
      [doneB, "text_completion"],
    ] as const) {
      const why = JSON.stringify({
        status: done.status,
        errors: done.errors,
        counts: done.request_counts,
        errorFile: await resultLines(client, done.error_file_id),
      });
      assert.equal(done.status, "completed", why);
      assert.equal((await resultLines(client, done.output_file_id))[0]?.response?.body.object, object, why);
    }
  });

  test("embeddings run as batches too, each line at the batch price", async () => {
    const embeddingLine = (customId: string, input: string | string[]) =>
      JSON.stringify({ custom_id: customId, method: "POST", url: "/v1/embeddings", body: { model: MINILM, input } });
    const input = await upload(client, [
      embeddingLine("e1", ["A man is eating food.", "A man is riding a horse."]),
      embeddingLine("e2", "One sentence."),
    ]);
    const created = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/embeddings", completion_window: "24h" });
    const batch = await settled(client, created.id);
    assert.equal(
      batch.status,
      "completed",
      JSON.stringify({ errors: batch.errors, counts: batch.request_counts, errorFile: await resultLines(client, batch.error_file_id) }),
    );
    type EmbeddingList = { object: string; data: Array<{ embedding: number[] }> };
    const bodies = new Map(
      (await resultLines(client, batch.output_file_id)).map((l) => [l.custom_id, l.response!.body as unknown as EmbeddingList]),
    );
    assert.equal(bodies.get("e1")?.object, "list");
    assert.deepEqual(
      bodies.get("e1")?.data.map((d) => d.embedding.length),
      [384, 384],
    );
    assert.equal(bodies.get("e2")?.data.length, 1);
    const rows = await database.db.query<{ service_tier: string; api: string; prompt_tokens: number; cost_usd: string }>(
      "SELECT service_tier, api, prompt_tokens, cost_usd::text AS cost_usd FROM usage_records WHERE batch_id = $1",
      [batch.id],
    );
    assert.equal(rows.length, 2);
    for (const row of rows) {
      assert.deepEqual([row.service_tier, row.api], ["batch", "embeddings"]);
      // MiniLM's list price, $0.005 per 1M input tokens, at the default batch multiplier 0.5.
      assert.equal(
        row.cost_usd,
        requestCost(
          { input: "0.0025", output: "0", cached_input: "0.0025" },
          { promptTokens: row.prompt_tokens, cachedPromptTokens: 0, completionTokens: 0 },
        ),
      );
    }
  });

  test("cancel: the lines not yet run are answered batch_cancelled, unbilled; the batch ends cancelled", async () => {
    const input = await upload(
      client,
      Array.from({ length: 12 }, (_, i) => chatLine(`c-${i}`, `Write a story about the number ${i}.`, 48)),
    );
    const created = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const cancelling = await client.batches.cancel(created.id);
    assert.ok(["cancelling", "cancelled"].includes(cancelling.status), cancelling.status);
    const batch = await settled(client, created.id);
    assert.equal(batch.status, "cancelled");
    assert.equal(typeof batch.cancelled_at, "number");
    const output = await resultLines(client, batch.output_file_id);
    const errors = await resultLines(client, batch.error_file_id);
    const ids = [...output, ...errors].map((l) => l.custom_id).sort();
    assert.deepEqual(ids, Array.from({ length: 12 }, (_, i) => `c-${i}`).sort(), "every line answered exactly once");
    assert.ok(errors.some((l) => l.error?.code === "batch_cancelled"));
    assert.equal(batch.request_counts!.completed + batch.request_counts!.failed, 12);
    const billed = await database.db.query<{ request_id: string }>(
      "SELECT request_id FROM usage_records WHERE batch_id = $1 AND cost_usd > 0",
      [batch.id],
    );
    assert.deepEqual(billed.map((r) => r.request_id).sort(), output.map((l) => l.response!.request_id).sort());
    await assert.rejects(
      client.batches
        .cancel(batch.id)
        .then((b) => assert.equal(b.status, "cancelled"))
        .then(() => client.batches.cancel("batch_nope")),
      (error: unknown) => error instanceof OpenAI.NotFoundError,
    );
  });

  test("list is newest first and paginates with after; another account lists none of them", async () => {
    const first = await client.batches.list({ limit: 2 });
    assert.equal(first.data.length, 2);
    assert.ok(first.data[0]!.created_at >= first.data[1]!.created_at);
    const next = await client.batches.list({ limit: 2, after: first.data[1]!.id });
    assert.ok(next.data.every((b) => !first.data.some((f) => f.id === b.id)));
    assert.equal((await stranger.batches.list()).data.length, 0);
    await assert.rejects(stranger.batches.retrieve(first.data[0]!.id), (error: unknown) => error instanceof OpenAI.NotFoundError);
    await assert.rejects(stranger.batches.cancel(first.data[0]!.id), (error: unknown) => error instanceof OpenAI.NotFoundError);
  });

  test("the CLI lists a batch, shows its counts, and cancels it", async () => {
    const api = ["--url", server.url, "--api-key", server.key];
    const input = await upload(
      client,
      Array.from({ length: 20 }, (_, i) => chatLine(`cli-${i}`, "Tell me a long story.", 96)),
    );
    const batch = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    assert.match(cli(["batches", "list", ...api]), new RegExp(`${batch.id}\\s+(in_progress|finalizing|completed)`));
    assert.match(cli(["batches", "get", batch.id, ...api]), /requests: \d+ completed, \d+ failed of 20/);
    assert.match(cli(["batches", "cancel", batch.id, ...api]), new RegExp(`${batch.id}  (cancelling|cancelled)`));
    assert.equal((await settled(client, batch.id)).status, "cancelled");
  });
});
