import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { loadCatalog } from "../../src/catalog/load.js";
import { findPulledModel } from "../../src/catalog/pull.js";
import { resolveModelsDir } from "../../src/config/paths.js";
import { GEMMA, postChat, readSse, ROOT, SMOLLM2, startServer, type RunningServer } from "../helpers/server.js";

/**
 * Reasoning end to end: the real server and a real model. No small reasoning model ships on PyPI,
 * so the test serves the real Gemma 270M GGUF under a test catalog entry whose chat template opens
 * `<think>` in the generation prompt (as DeepSeek-R1's and Qwen3.5's do) and renders an empty
 * think block when `enable_thinking` is false (Qwen3's switch). Shown a few worked examples, the
 * model really writes its reasoning, closes `</think>` and answers; the server has to split that.
 */
const THINKER = "test/gemma-thinking";

const shot = (question: string, thought: string, answer: string) => [
  { role: "user" as const, content: question },
  { role: "assistant" as const, content: `<think>\n${thought}\n</think>\n\n${answer}` },
];
const messages = [
  ...shot("What is 2 + 3?", "Two plus three makes five", "The answer is 5."),
  ...shot("What is 6 + 1?", "Six plus one makes seven", "The answer is 7."),
  ...shot("What is 4 + 5?", "Four plus five makes nine", "The answer is 9."),
  { role: "user" as const, content: "What is 4 + 4?" },
];
// The examples' reasoning has no period, their answers end with one: the stop string ends the answer.
const request = { model: THINKER, messages, temperature: 0, seed: 1, max_tokens: 40, stop: ["."] };

interface Completion {
  choices: Array<{ message: { content: string | null; reasoning_content?: string }; finish_reason: string }>;
  usage: { prompt_tokens: number; completion_tokens: number; completion_tokens_details: { reasoning_tokens: number } };
}

async function testCatalog(dir: string): Promise<string> {
  const gemma = (await loadCatalog()).find((e) => e.id === GEMMA)!;
  const pulled = await findPulledModel(gemma, resolveModelsDir());
  assert.ok(pulled, "Gemma is pulled (npm test pulls it first)");
  const file = join(dir, "catalog.json");
  const entry = {
    ...gemma,
    aliases: undefined, // each alias names one model
    id: THINKER,
    source: `file:${pulled.path}`,
    tags: ["JSON"],
    fallback_chat_template: join(ROOT, "test/fixtures/gemma-thinking.jinja"),
  };
  writeFileSync(file, JSON.stringify({ models: [entry] }));
  return file;
}

describe("reasoning: reasoning_content, reasoning_tokens and reasoning_effort", () => {
  let server: RunningServer;
  let catalogDir: string;
  before(async () => {
    catalogDir = mkdtempSync(join(tmpdir(), "switchyard-catalog-"));
    server = await startServer({ models: [SMOLLM2, THINKER], env: { SWITCHYARD_CATALOG: await testCatalog(catalogDir) } });
  });
  after(async () => {
    await server?.stop();
    rmSync(catalogDir, { recursive: true, force: true });
  });

  test("the thinking comes back in reasoning_content, the answer in content, and the tokens are counted", async () => {
    const response = await postChat(server, request);
    assert.equal(response.status, 200);
    const body = (await response.json()) as Completion;
    const [choice] = body.choices;
    const reasoning = choice!.message.reasoning_content ?? "";
    const content = choice!.message.content ?? "";
    assert.ok(reasoning.length > 0, `reasoning_content: ${JSON.stringify(choice!.message)}`);
    assert.ok(content.length > 0, `content: ${JSON.stringify(choice!.message)}`);
    for (const text of [reasoning, content]) assert.doesNotMatch(text, /<\/?think>/);
    assert.equal(choice!.finish_reason, "stop");
    const { completion_tokens, completion_tokens_details } = body.usage;
    assert.ok(completion_tokens_details.reasoning_tokens > 0);
    assert.ok(completion_tokens_details.reasoning_tokens < completion_tokens, "the answer's tokens are not reasoning");
  });

  test("a stream carries the same split in delta.reasoning_content and delta.content, reasoning first", async () => {
    const whole = (await (await postChat(server, request)).json()) as Completion;
    const response = await postChat(server, { ...request, stream: true, stream_options: { include_usage: true } });
    const chunks = (await readSse(response)).filter((d) => d !== "[DONE]").map((d) => JSON.parse(d));
    const deltas = chunks.flatMap((c) => c.choices.map((ch: { delta: { content?: string; reasoning_content?: string } }) => ch.delta));
    const reasoning = deltas.map((d) => d.reasoning_content ?? "").join("");
    const content = deltas.map((d) => d.content ?? "").join("");
    assert.equal(reasoning, whole.choices[0]!.message.reasoning_content);
    assert.equal(content, whole.choices[0]!.message.content);
    const firstContent = deltas.findIndex((d) => d.content);
    assert.ok(
      firstContent > 0 && deltas.slice(firstContent).every((d) => !d.reasoning_content),
      "all reasoning deltas come before the answer",
    );
    assert.deepEqual(chunks.at(-1).usage.completion_tokens_details, whole.usage.completion_tokens_details);
    assert.equal(chunks.at(-1).usage.completion_tokens, whole.usage.completion_tokens);
  });

  test("cut off while thinking: all of it is reasoning, content is null, every token a reasoning token", async () => {
    const response = await postChat(server, { ...request, max_tokens: 3 });
    const body = (await response.json()) as Completion;
    const choice = body.choices[0]!;
    assert.equal(choice.finish_reason, "length");
    assert.equal(choice.message.content, null);
    assert.ok((choice.message.reasoning_content ?? "").length > 0);
    assert.equal(body.usage.completion_tokens, 3);
    assert.equal(body.usage.completion_tokens_details.reasoning_tokens, 3);
  });

  test("reasoning_effort none reaches the template as enable_thinking: false; the model answers without thinking", async () => {
    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL });
    const thinking = await client.chat.completions.create({ ...request, reasoning_effort: "low" });
    const direct = await client.chat.completions.create({ ...request, reasoning_effort: "none" });
    // The template rendered "<think>\n\n</think>\n\n" instead of "<think>\n": a longer prompt.
    assert.ok(direct.usage!.prompt_tokens > thinking.usage!.prompt_tokens);
    const message = direct.choices[0]!.message as { content: string | null; reasoning_content?: string };
    assert.equal(message.reasoning_content, undefined);
    assert.ok((message.content ?? "").length > 0);
    assert.equal(direct.usage!.completion_tokens_details!.reasoning_tokens, 0);
    assert.ok((thinking.usage!.completion_tokens_details!.reasoning_tokens ?? 0) > 0);
  });

  test("JSON output from the thinking model: grammar-bound, thinking off, all content, and it parses", async () => {
    const response = await postChat(server, { ...request, stop: undefined, response_format: { type: "json_object" }, max_tokens: 60 });
    const body = (await response.json()) as Completion;
    const choice = body.choices[0]!;
    assert.equal(choice.message.reasoning_content, undefined);
    assert.equal(body.usage.completion_tokens_details.reasoning_tokens, 0);
    if (choice.finish_reason === "stop") assert.equal(typeof JSON.parse(choice.message.content!), "object");
    else assert.equal(choice.finish_reason, "length");
  });

  test("a model that does not think: no reasoning_content, reasoning_tokens 0 in JSON and in the stream's usage", async () => {
    const plain = { model: SMOLLM2, messages: [{ role: "user", content: "Say hi." }], max_tokens: 8, temperature: 0 };
    const body = (await (await postChat(server, plain)).json()) as Completion;
    assert.equal(body.choices[0]!.message.reasoning_content, undefined);
    assert.equal(typeof body.choices[0]!.message.content, "string");
    assert.deepEqual(body.usage.completion_tokens_details, {
      reasoning_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    });
    const chunks = (await readSse(await postChat(server, { ...plain, stream: true, stream_options: { include_usage: true } })))
      .filter((d) => d !== "[DONE]")
      .map((d) => JSON.parse(d));
    assert.ok(chunks.every((c) => c.choices.every((ch: { delta: object }) => !("reasoning_content" in ch.delta))));
    assert.deepEqual(chunks.at(-1).usage.completion_tokens_details, {
      reasoning_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    });
  });

  test("an unknown reasoning_effort is a 400 naming the parameter", async () => {
    const response = await postChat(server, { ...request, reasoning_effort: "extreme" });
    const body = (await response.json()) as { error: { param: string; message: string; type: string } };
    assert.equal(response.status, 400);
    assert.equal(body.error.param, "reasoning_effort");
    assert.equal(body.error.type, "invalid_request_error");
    assert.match(body.error.message, /'none', 'minimal', 'low', 'medium', 'high'/);
  });
});
