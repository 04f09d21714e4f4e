import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { addMoney, compareMoney } from "../../src/billing/cost.js";
import { MINILM } from "../helpers/embeddings.js";
import { adminKey, adminCall, postChat, SMOLLM2, type ServerAddress } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

const post = (server: ServerAddress, body: unknown, key = server.key, prefix = "/v1/compat") =>
  fetch(`${server.url}${prefix}/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });

async function expectError(response: Response, status: number, code: string, param?: string): Promise<string> {
  const body = await response.json();
  assert.equal(response.status, status, JSON.stringify(body));
  assert.equal(body.error.code, code, JSON.stringify(body));
  if (param !== undefined) assert.equal(body.error.param, param);
  return body.error.message as string;
}

describe("POST /v1/embeddings: OpenAI's API shape on the platform", () => {
  let server: SharedServer;
  let client: OpenAI;
  before(async () => {
    server = await sharedServer({ models: [SMOLLM2, MINILM], exclusive: true });
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000 });
  });
  after(async () => {
    await server?.stop();
  });

  test("float and base64 (little-endian float32) carry the same vectors; usage has the exact cost", async () => {
    const input = ["first input", "the second one is longer than the first"];
    const floats = await client.embeddings.create({ model: MINILM, input, encoding_format: "float" });
    const text = await (await post(server, { model: MINILM, input, encoding_format: "base64" })).text();
    const raw = JSON.parse(text) as { data: Array<{ embedding: string }>; usage: Record<string, unknown> };
    raw.data.forEach((item, i) => {
      const bytes = Buffer.from(item.embedding, "base64");
      const decoded = Array.from({ length: bytes.length / 4 }, (_, k) => bytes.readFloatLE(k * 4));
      assert.deepEqual(
        decoded,
        floats.data[i]!.embedding.map((v) => Math.fround(v)),
      );
    });
    // Without encoding_format the SDK asks for base64 and decodes it itself.
    const viaSdk = await client.embeddings.create({ model: MINILM, input });
    assert.deepEqual(
      viaSdk.data.map((d) => d.embedding),
      floats.data.map((d) => d.embedding.map((v) => Math.fround(v))),
    );
    const tokens = floats.usage.prompt_tokens;
    assert.equal(floats.usage.total_tokens, tokens);
    // 0.005 USD per 1M input tokens at the standard tier: 5e-9 a token, written exactly.
    const cost = `0.${String(tokens * 5).padStart(9, "0")}`.replace(/0+$/, "");
    assert.ok(text.includes(`"estimated_cost":${cost}`), `${cost} in ${text.slice(-200)}`);
    assert.equal(raw.usage.prompt_tokens, tokens);
  });

  test("every input form: a string, strings, token ids, arrays of token ids; under every prefix", async () => {
    for (const [input, count] of [
      ["one", 1],
      [["a", "b", "c"], 3],
      [[7592, 2088], 1],
      [[[7592], [2088, 999]], 2],
    ] as const) {
      for (const prefix of ["/v1/compat", "/v1/openai", "/v1"]) {
        const response = await post(server, { model: MINILM, input }, server.key, prefix);
        const body = await response.json();
        assert.equal(response.status, 200, JSON.stringify(body));
        assert.equal(body.object, "list");
        assert.equal(body.data.length, count);
        assert.equal(body.data[0].object, "embedding");
      }
    }
    const ok = await client.embeddings.create({ model: MINILM, input: "x", dimensions: 384, user: "someone" });
    assert.equal(ok.data[0]!.embedding.length, 384);
  });

  test("bad input is a 400 in the OpenAI shape that says why", async () => {
    await expectError(await post(server, { model: MINILM, input: "" }), 400, "invalid_value", "input");
    await expectError(await post(server, { model: MINILM, input: ["fine", ""] }), 400, "invalid_value", "input[1]");
    await expectError(await post(server, { model: MINILM, input: Array(2049).fill("x") }), 400, "invalid_type", "input");
    assert.match(
      await expectError(await post(server, { model: MINILM, input: "x", dimensions: 128 }), 400, "invalid_value", "dimensions"),
      /384/,
    );
    await expectError(await post(server, { model: MINILM, input: "x", encoding_format: "int8" }), 400, "invalid_value", "encoding_format");
    await expectError(await post(server, { model: MINILM, input: [[1, 99999]] }), 400, "invalid_value", "input[0]");
    const long = "word ".repeat(600);
    assert.match(
      await expectError(await post(server, { model: MINILM, input: ["short", long] }), 400, "context_length_exceeded", "input[1]"),
      /input 1 has 602 tokens/,
    );
  });

  test("a chat request to the embedding model, and an embeddings request to a chat model, are clear 400s", async () => {
    assert.match(
      await expectError(
        await postChat(server, { model: MINILM, messages: [{ role: "user", content: "hi" }] }),
        400,
        "model_not_supported",
        "model",
      ),
      /embedding model/,
    );
    assert.match(
      await expectError(await post(server, { model: SMOLLM2, input: "hi" }), 400, "model_not_supported", "model"),
      /not an embedding model/,
    );
  });

  test("/models tags it Embedding with its price; /metrics counts its input tokens; OpenAPI documents the route", async () => {
    const model = await client.models.retrieve(MINILM);
    const metadata = (model as unknown as { metadata: { tags: string[]; pricing: Record<string, unknown> } }).metadata;
    assert.deepEqual(metadata.tags, ["Embedding"]);
    assert.ok(metadata.pricing, "priced");
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, new RegExp(`vllm:prompt_tokens_total\\{model_name="${MINILM}",tier="default"\\} [1-9]`));
    const openapi = await (await fetch(`${server.url}/openapi.json`)).json();
    assert.ok(openapi.paths["/v1/compat/embeddings"]?.post, "documented");
  });

  test("keys: a model allow-list hides it, a tokens-per-minute limit counts input tokens, a budget is reserved", async () => {
    const chatOnly = await adminKey(server, server.account, { allowed_models: [SMOLLM2] });
    await expectError(await post(server, { model: MINILM, input: "x" }, chatOnly), 404, "model_not_found");
    const smallTpm = await adminKey(server, server.account, { tpm_limit: 100 });
    // "hello" is 3 tokens with CLS and SEP: 60 input tokens a request, so the second one is over 100.
    const first = await post(server, { model: MINILM, input: Array(20).fill("hello") }, smallTpm);
    assert.equal(first.status, 200);
    // The answer's rate-limit headers are the window as this request's admission left it.
    assert.equal(first.headers.get("x-ratelimit-limit-tokens"), "100");
    assert.equal(first.headers.get("x-ratelimit-remaining-tokens"), "40");
    await expectError(await post(server, { model: MINILM, input: Array(20).fill("hello") }, smallTpm), 429, "rate_limit_exceeded");
    const tiny = await adminKey(server, server.account, { budget_usd: "0.000001" });
    await expectError(await post(server, { model: MINILM, input: "word ".repeat(300) }, tiny), 402, "insufficient_quota");
  });

  test("a key's spend holds each answered embedding's exact cost when the answer arrives, with a budget or without", async () => {
    const admin = async (method: string, path: string, body?: unknown) => (await adminCall(server, method, path, body)).body;
    for (const budget of [null, "1"]) {
      const created = await admin("POST", "/admin/v1/keys", {
        account: `embed-spend-${budget ?? "none"}`,
        ...(budget ? { budget_usd: budget } : {}),
      });
      const costs: string[] = [];
      for (const input of ["spent at once", ["two inputs", "billed together"]]) {
        const text = await (await post(server, { model: MINILM, input }, created.key)).text();
        costs.push(/"estimated_cost":([0-9.e-]+)/.exec(text)![1]!);
        // Read straight after the answer: with a budget the answer waits for its row; without one its
        // row may still be in the ledger's journal, and a keys listing waits for it as /v1/usage does.
        const key = (await admin("GET", `/admin/v1/keys?account=embed-spend-${budget ?? "none"}`)).data[0];
        assert.equal(compareMoney(key.spent_usd, costs.reduce(addMoney)), 0, `spent ${key.spent_usd}, answered ${costs.join(" + ")}`);
      }
    }
  });

  test("one ledger row per request, api embeddings, in /v1/usage", async () => {
    const before = await (
      await fetch(`${server.url}/v1/usage?group_by=model`, { headers: { authorization: `Bearer ${server.key}` } })
    ).json();
    const reply = await client.embeddings.create({ model: MINILM, input: ["ledger one", "ledger two"] });
    await post(server, { model: MINILM, input: "" }); // rejected by validation: no row, nothing admitted
    await post(server, { model: MINILM, input: "x", dimensions: 3 }); // refused by the service: a rejected row
    const usage = await (
      await fetch(`${server.url}/v1/usage?group_by=model`, { headers: { authorization: `Bearer ${server.key}` } })
    ).json();
    const group = (u: { data: Array<{ group: string; requests: number; prompt_tokens: number }> }) =>
      u.data.find((g) => g.group === MINILM);
    assert.equal(group(usage)!.requests - (group(before)?.requests ?? 0), 2);
    assert.equal(group(usage)!.prompt_tokens - (group(before)?.prompt_tokens ?? 0), reply.usage.prompt_tokens);
  });

  test("many requests at once are all answered and billed, one completed row each (their rows share statements); the server warns of nothing", async () => {
    const usageOf = async () =>
      (
        await (await fetch(`${server.url}/v1/usage?group_by=model`, { headers: { authorization: `Bearer ${server.key}` } })).json()
      ).data.find((g: { group: string }) => g.group === MINILM);
    const before = await usageOf();
    const replies = await Promise.all(Array.from({ length: 24 }, (_, i) => post(server, { model: MINILM, input: `concurrent ${i}` })));
    assert.deepEqual(
      replies.map((r) => r.status),
      replies.map(() => 200),
    );
    const bodies = (await Promise.all(replies.map((r) => r.json()))) as Array<{ usage: { prompt_tokens: number } }>;
    const after = await usageOf();
    assert.equal(after.requests - (before?.requests ?? 0), 24);
    assert.equal(after.by_status.completed - (before?.by_status.completed ?? 0), 24);
    assert.equal(
      after.prompt_tokens - (before?.prompt_tokens ?? 0),
      bodies.reduce((sum, b) => sum + b.usage.prompt_tokens, 0),
    );
    // Each request listens on the server's shutdown signal while it runs: 24 at once are no leak to warn of.
    assert.doesNotMatch(server.logs(), /Warning/);
  });
});
