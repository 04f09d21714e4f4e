import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import OpenAI from "openai";
import { MINILM } from "../helpers/embeddings.js";
import { adminKey, postChat, readSse, ROOT, SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

const PYTHON = join(ROOT, ".cache/py-openai/bin/python");
const SMOL_ALIAS = "smollm2-135m";
const MESSAGES = [
  { role: "system", content: "You are a terse assistant." },
  { role: "user", content: "Name three colours." },
];
const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } } },
  },
};

describe("/tokenize, /detokenize, model aliases and the streamed role", () => {
  let server: SharedServer;
  const post = (path: string, body: unknown, key: string | null = server.key) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body),
    });
  const usage = async () => {
    const response = await fetch(`${server.url}/v1/usage?group_by=model`, { headers: { authorization: `Bearer ${server.key}` } });
    return (await response.json()) as { totals: { requests: number }; data: Array<{ group: string; requests: number }> };
  };

  before(async () => {
    server = await sharedServer({ models: [SMOLLM2, MINILM], exclusive: true });
  });
  after(async () => {
    await server?.stop();
  });

  test("a conversation's count is the prompt_tokens of the same chat request, with and without tools", async () => {
    for (const tools of [undefined, [WEATHER_TOOL]]) {
      const counted = await post("/tokenize", { model: SMOLLM2, messages: MESSAGES, ...(tools ? { tools } : {}) });
      assert.equal(counted.status, 200);
      const body = (await counted.json()) as { count: number; tokens: number[]; max_model_len: number };
      assert.equal(body.count, body.tokens.length);
      assert.ok(body.max_model_len >= 2048);
      const chat = await postChat(server, { model: SMOLLM2, messages: MESSAGES, max_tokens: 2, ...(tools ? { tools } : {}) });
      assert.equal(chat.status, 200);
      assert.equal(((await chat.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens, body.count);
    }
    // Without the assistant turn's opening the rendering is shorter.
    const open = (await (await post("/tokenize", { model: SMOLLM2, messages: MESSAGES })).json()) as { count: number };
    const closed = (await (await post("/tokenize", { model: SMOLLM2, messages: MESSAGES, add_generation_prompt: false })).json()) as {
      count: number;
    };
    assert.ok(closed.count < open.count);
  });

  test("a prompt round-trips through /detokenize, at the root and under every prefix, by id or alias", async () => {
    const text = "The quick brown fox jumps over the lazy dog.";
    const answers = [];
    for (const path of ["/tokenize", "/v1/tokenize", "/v1/compat/tokenize", "/v1/openai/tokenize"]) {
      const response = await post(path, { model: path === "/v1/tokenize" ? SMOL_ALIAS : SMOLLM2, prompt: text, return_token_strs: true });
      assert.equal(response.status, 200, path);
      answers.push(await response.json());
    }
    for (const answer of answers) assert.deepEqual(answer, answers[0]);
    const { tokens, token_strs } = answers[0] as { tokens: number[]; token_strs: string[] };
    assert.equal(token_strs.length, tokens.length);
    assert.equal(token_strs.join(""), text);
    const back = await post("/v1/detokenize", { model: SMOLLM2, tokens });
    assert.equal(back.status, 200);
    assert.deepEqual(await back.json(), { prompt: text });
    // The chat template's special tokens are spelled out.
    const chat = (await (await post("/tokenize", { model: SMOLLM2, messages: MESSAGES })).json()) as { tokens: number[] };
    const rendered = ((await (await post("/detokenize", { model: SMOLLM2, tokens: chat.tokens })).json()) as { prompt: string }).prompt;
    assert.match(rendered, /<\|im_start\|>system\nYou are a terse assistant\.<\|im_end\|>/);
    assert.match(rendered, /<\|im_start\|>assistant\n$/);
  });

  test("an embedding model counts as its embeddings request does: CLS and SEP included unless asked not to", async () => {
    const input = "Sentence embeddings map text to vectors.";
    const counted = (await (await post("/v1/tokenize", { model: MINILM, prompt: input })).json()) as {
      count: number;
      max_model_len: number;
    };
    const embedded = await post("/v1/embeddings", { model: MINILM, input });
    assert.equal(embedded.status, 200);
    assert.equal(((await embedded.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens, counted.count);
    assert.equal(counted.max_model_len, 512);
    const bare = (await (await post("/v1/tokenize", { model: MINILM, prompt: input, add_special_tokens: false })).json()) as {
      count: number;
    };
    assert.equal(bare.count, counted.count - 2);
    const chat = await post("/v1/tokenize", { model: MINILM, messages: MESSAGES });
    assert.equal(chat.status, 400);
    const { error } = (await chat.json()) as { error: { param: string | null; code: string | null } };
    assert.deepEqual([error.param, error.code], ["messages", "model_not_supported"]);
  });

  test("bad input gets OpenAI-shaped errors; no key is a 401; another model is a 404", async () => {
    const expect = async (response: Response, status: number, param?: string | null) => {
      assert.equal(response.status, status);
      const { error } = (await response.json()) as { error: { message: string; type: string; param: string | null; code: string | null } };
      assert.equal(typeof error.message, "string");
      if (param !== undefined) assert.equal(error.param, param);
    };
    await expect(await post("/tokenize", { model: SMOLLM2, prompt: "hi" }, null), 401);
    await expect(await post("/tokenize", { model: "nobody/nothing", prompt: "hi" }), 404);
    await expect(await post("/tokenize", { model: SMOLLM2, prompt: "hi", messages: MESSAGES }), 400, "prompt");
    await expect(await post("/tokenize", { model: SMOLLM2 }), 400, "prompt");
    await expect(await post("/detokenize", { model: SMOLLM2, tokens: [1, 10_000_000] }), 400, "tokens[1]");
    await expect(await post("/detokenize", { model: SMOLLM2, tokens: [1, -2] }), 400, "tokens[1]");
    await expect(await post("/detokenize", { model: SMOLLM2, tokens: "abc" }), 400, "tokens");
  });

  test("token calls are never billed but count against the key's request rate", async () => {
    const before = (await usage()).totals.requests;
    for (let i = 0; i < 3; i++) assert.equal((await post("/tokenize", { model: SMOLLM2, prompt: "hi" })).status, 200);
    assert.equal((await usage()).totals.requests, before);
    const limited = await adminKey(server, "token-rate", { rpm_limit: 2 });
    assert.equal((await post("/tokenize", { model: SMOLLM2, prompt: "one" }, limited)).status, 200);
    const second = await post("/detokenize", { model: SMOLLM2, tokens: [1] }, limited);
    assert.equal(second.status, 200);
    assert.equal(second.headers.get("x-ratelimit-limit-requests"), "2");
    const third = await post("/tokenize", { model: SMOLLM2, prompt: "three" }, limited);
    assert.equal(third.status, 429);
  });

  test("an alias calls the model, the answer echoes it, and the ledger and the list use the canonical id", async () => {
    const client = new OpenAI({ apiKey: server.key, baseURL: `${server.url}/v1` });
    const reply = await client.chat.completions.create({ model: SMOL_ALIAS, messages: [{ role: "user", content: "Hi" }], max_tokens: 3 });
    assert.equal(reply.model, SMOL_ALIAS);
    const embedded = await client.embeddings.create({ model: "all-minilm-l6-v2", input: "hello" });
    assert.equal(embedded.model, "all-minilm-l6-v2");
    const listed = await client.models.list();
    const smol = listed.data.filter((m) => m.id === SMOLLM2 || m.id === SMOL_ALIAS);
    assert.deepEqual(
      smol.map((m) => m.id),
      [SMOLLM2],
    );
    assert.deepEqual((smol[0] as unknown as { metadata: { aliases: string[] } }).metadata.aliases, [SMOL_ALIAS]);
    assert.equal((await client.models.retrieve(SMOL_ALIAS)).id, SMOLLM2);
    const groups = (await usage()).data.map((g) => g.group);
    assert.ok(groups.includes(SMOLLM2) && groups.includes(MINILM));
    assert.ok(!groups.includes(SMOL_ALIAS) && !groups.includes("all-minilm-l6-v2"));
    // A key limited to the model by its id may call it by its alias.
    const limited = await adminKey(server, "alias-limited", { allowed_models: [SMOLLM2] });
    const byAlias = await postChat(
      server,
      { model: SMOL_ALIAS, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 },
      { key: limited },
    );
    assert.equal(byAlias.status, 200);
  });

  test("under /v1 each choice's first chunk carries the role, later ones do not; /v1/compat keeps it in every content chunk", async () => {
    const body = { model: SMOLLM2, messages: [{ role: "user", content: "Count to five." }], max_tokens: 8, n: 2, stream: true };
    const read = async (prefix: string) => {
      const response = await fetch(`${server.url}${prefix}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${server.key}` },
        body: JSON.stringify(body),
      });
      assert.equal(response.status, 200);
      const events = await readSse(response);
      return events.slice(0, -1).map((e) => JSON.parse(e) as { choices: Array<{ index: number; delta: Record<string, unknown> }> });
    };
    for (const prefix of ["/v1", "/v1/openai"]) {
      const seen = new Set<number>();
      for (const chunk of await read(prefix)) {
        for (const choice of chunk.choices) {
          if (Object.keys(choice.delta).length === 0) continue; // the final empty delta
          assert.equal(choice.delta.role === "assistant", !seen.has(choice.index), `${prefix} choice ${choice.index}`);
          seen.add(choice.index);
        }
      }
      assert.deepEqual([...seen].sort(), [0, 1]);
    }
    for (const chunk of await read("/v1/compat"))
      for (const choice of chunk.choices) if ("content" in choice.delta) assert.equal(choice.delta.role, "assistant");
  });

  test(
    "the OpenAI Agents SDK's default client runs an agent against an alias, with no custom provider",
    { skip: existsSync(PYTHON) ? false : `no Python with openai-agents at ${PYTHON}` },
    async () => {
      const script = join(ROOT, "test/fixtures/agents-sdk-alias.py");
      const env = { ...process.env, OPENAI_BASE_URL: `${server.url}/v1`, OPENAI_API_KEY: server.key, OPENAI_AGENTS_DISABLE_TRACING: "1" };
      const { stdout } = await promisify(execFile)(PYTHON, [script, SMOL_ALIAS], { env, timeout: 300_000 });
      const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as { output: string; api: string }[];
      assert.deepEqual(
        result.map((r) => r.api),
        ["responses", "chat_completions"],
      );
      for (const r of result) assert.ok(r.output.trim().length > 0, r.api);
    },
  );
});
