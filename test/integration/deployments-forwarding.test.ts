import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { resultLines, settled, upload } from "../helpers/batches.js";
import { createTestDatabase, type TestDatabase } from "../helpers/databases.js";
import { api, waitForDeployment } from "../helpers/deployments.js";
import { adminKey, postChat, SMOLLM2, startServer, waitFor, type RunningServer } from "../helpers/server.js";

/**
 * Issue 13, section 2: gateways sharing one PostgreSQL serve any deployment. A deployment runs on
 * server A; server B forwards its requests to A and streams A's answer back. A writes the one
 * ledger row; another account gets B's own 404, as for a model that does not exist.
 */
const ENV = { SWITCHYARD_DEPLOYMENT_TICK_MS: "300", SWITCHYARD_MAX_CONTEXT: "1024", SWITCHYARD_PARALLEL: "2" };
const MESSAGES = [{ role: "user" as const, content: "Say hello." }];

describe("a deployment called through another server sharing the database", () => {
  let database: TestDatabase;
  let a: RunningServer | undefined;
  let b: RunningServer | undefined;
  let modelId = "";

  const client = (server: RunningServer, key: string) =>
    new OpenAI({ baseURL: server.baseURL, apiKey: key, timeout: 180_000, maxRetries: 0 });
  /** The request's ledger rows once it has settled (a stream's row is closed as it ends). */
  const ledgerRows = (requestId: string) =>
    waitFor(async () => {
      const rows = await database.db.query<{ model: string; status: string }>(
        "SELECT model, status FROM usage_records WHERE request_id = $1",
        [requestId],
      );
      return rows.some((r) => r.status === "in_flight") ? undefined : rows;
    }, 30_000);
  /** Every ledger row of the deployment's own account, whichever server wrote it. */
  const ownRows = async () =>
    Number(
      (
        await database.db.query<{ n: string }>(
          "SELECT count(*) AS n FROM usage_records u JOIN accounts a ON a.id = u.account_id WHERE a.name = 'tester' AND u.model = $1",
          [modelId],
        )
      )[0]!.n,
    );

  before(async () => {
    database = await createTestDatabase("postgres");
    const env = { ...ENV, SWITCHYARD_DATABASE_URL: database.url };
    a = await startServer({ env, keyArgs: ["--manage-deployments"] });
    // The same account's key, from the shared database: B sees the same accounts and keys.
    b = await startServer({ env, key: a.key });
    const created = await api(a, a.key, "POST", "/v1/deployments", { model: SMOLLM2, name: "shared", max_batch_size: 1 });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    modelId = created.body.model_id;
    await waitForDeployment(a, a.key, created.body.id, (d) => d.status === "running");
  });
  after(async () => {
    await b?.stop();
    await a?.stop();
    await database?.dispose();
  });

  test("a non-streamed request through B is answered by A and billed once", async () => {
    const completion = await client(b!, b!.key).chat.completions.create({ model: modelId, messages: MESSAGES, max_tokens: 8 });
    assert.equal(completion.object, "chat.completion");
    assert.equal(completion.model, modelId);
    assert.equal(typeof completion.choices[0]!.message.content, "string");
    assert.ok(completion.usage!.completion_tokens > 0);
    assert.equal(
      (completion.usage as unknown as { estimated_cost: number }).estimated_cost,
      0,
      "a deployment bills instance time, not tokens",
    );
    assert.deepEqual(await ledgerRows(completion.id), [{ model: modelId, status: "completed" }]);
  });

  test("a streamed request through B streams A's chunks and is billed once", async () => {
    const stream = await client(b!, b!.key).chat.completions.create({
      model: modelId,
      messages: MESSAGES,
      max_tokens: 8,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.ok(chunks.length >= 3, "role, content and finish arrive as separate chunks");
    assert.ok(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0]!.id && c.model === modelId));
    assert.ok(chunks.some((c) => c.choices[0]?.finish_reason));
    assert.ok(chunks.at(-1)!.usage!.completion_tokens > 0, "the usage chunk comes last");
    assert.deepEqual(await ledgerRows(chunks[0]!.id), [{ model: modelId, status: "completed" }]);
  });

  test("legacy completions through B reach the deployment too", async () => {
    const completion = await client(b!, b!.key).completions.create({ model: modelId, prompt: "Hello", max_tokens: 4 });
    assert.equal(completion.object, "text_completion");
    assert.deepEqual(await ledgerRows(completion.id), [{ model: modelId, status: "completed" }]);
    assert.equal(await ownRows(), 3, "three requests, three rows: the forwarding side wrote none");
  });

  test("tokenize and detokenize through B reach the deployment on A, at the root and under /v1, and bill nothing", async () => {
    const rowsBefore = await ownRows();
    const body = { model: modelId, messages: MESSAGES, add_generation_prompt: true };
    const direct = await api(a!, a!.key, "POST", "/tokenize", body);
    assert.equal(direct.status, 200, JSON.stringify(direct.body));
    assert.ok(direct.body.count > 0);
    for (const path of ["/tokenize", "/v1/tokenize"]) {
      const through = await api(b!, b!.key, "POST", path, body);
      assert.equal(through.status, 200, `${path}: ${JSON.stringify(through.body)}`);
      assert.deepEqual(through.body.tokens, direct.body.tokens, `${path}: the deployment's own tokens`);
      assert.equal(through.body.count, direct.body.count);
    }
    const back = await api(b!, b!.key, "POST", "/v1/detokenize", { model: modelId, tokens: direct.body.tokens });
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(typeof back.body.prompt, "string");
    assert.ok(back.body.prompt.length > 0);
    assert.equal(await ownRows(), rowsBefore, "token endpoints are never billed");
  });

  test("a batch run by B whose lines name the deployment is answered by A, each line once, billed as a batch line", async () => {
    const lines = ["first", "second"].map((customId) =>
      JSON.stringify({
        custom_id: customId,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: modelId, messages: MESSAGES, max_tokens: 4 },
      }),
    );
    const input = await upload(client(b!, b!.key), lines);
    const created = await client(b!, b!.key).batches.create({
      input_file_id: input.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    const batch = await settled(client(b!, b!.key), created.id);
    const results = await resultLines(client(b!, b!.key), batch.output_file_id);
    assert.equal(batch.status, "completed", JSON.stringify({ errors: batch.errors, results }));
    assert.deepEqual(
      results.map((r) => [r.custom_id, r.response?.status_code]).sort(),
      [
        ["first", 200],
        ["second", 200],
      ],
      JSON.stringify(results),
    );
    const rows = await database.db.query<{ model: string; service_tier: string; status: string }>(
      "SELECT model, service_tier, status FROM usage_records WHERE batch_id = $1",
      [created.id],
    );
    assert.deepEqual(
      rows,
      lines.map(() => ({ model: modelId, service_tier: "batch", status: "completed" })),
    );
    const passes = await database.db.query("SELECT 1 FROM batch_line_passes WHERE batch_id = $1", [created.id]);
    assert.equal(passes.length, 0, "each line's pass was spent by the request it carried");
  });

  test("a forged or spent batch-line token is refused by the owner", async () => {
    for (const token of [`sy-batch-${"A".repeat(32)}`, "sy-batch-short"]) {
      const reply = await postChat(
        a!,
        { model: modelId, messages: MESSAGES, max_tokens: 4 },
        { key: token, headers: { "x-switchyard-forwarded": "1" } },
      );
      assert.equal(reply.status, 401);
    }
  });

  test("another account through B gets the 404 of a model that does not exist", async () => {
    const other = await adminKey(b!, "someone-else");
    const reply = await postChat(b!, { model: modelId, messages: MESSAGES, max_tokens: 4 }, { key: other });
    const body = (await reply.json()) as { error: { code: string; type: string; param: string | null } };
    const missing = await postChat(b!, { model: "someone/nothing-here", messages: MESSAGES, max_tokens: 4 }, { key: other });
    const missingBody = (await missing.json()) as typeof body;
    assert.equal(reply.status, 404);
    assert.equal(missing.status, 404);
    assert.equal(body.error.code, "model_not_found");
    assert.deepEqual({ ...body.error, message: "" }, { ...missingBody.error, message: "" });
    await assert.rejects(
      client(b!, other).chat.completions.create({ model: modelId, messages: MESSAGES, max_tokens: 4 }),
      (e: { status?: number; code?: string }) => e.status === 404 && e.code === "model_not_found",
    );
  });

  test("a request already forwarded is never forwarded again", async () => {
    const reply = await postChat(b!, { model: modelId, messages: MESSAGES, max_tokens: 4 }, { headers: { "x-switchyard-forwarded": "1" } });
    assert.equal(reply.status, 503);
    const body = (await reply.json()) as { error: { code: string } };
    assert.equal(body.error.code, "capacity_unavailable");
  });

  test("an owner that cannot be reached is a 503 in the OpenAI shape", async () => {
    // Nothing listens on the discard port: as if A's address were wrong or A had just died.
    await database.db.query("UPDATE server_owners SET url = 'http://127.0.0.1:9' WHERE url = $1", [a!.url]);
    try {
      const reply = await postChat(b!, { model: modelId, messages: MESSAGES, max_tokens: 4 });
      assert.equal(reply.status, 503);
      const body = (await reply.json()) as { error: { code: string; type: string; message: string; param: null } };
      assert.deepEqual({ ...body.error, message: "" }, { message: "", type: "server_error", code: "capacity_unavailable", param: null });
      assert.doesNotMatch(body.error.message, /127\.0\.0\.1/, "the owner's address is not told to callers");
    } finally {
      await database.db.query("UPDATE server_owners SET url = $1 WHERE url = 'http://127.0.0.1:9'", [a!.url]);
    }
  });
});
