import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { postChat, ROOT, startServer, type RunningServer } from "../helpers/server.js";

const QWEN = "Qwen/Qwen2.5-Coder-0.5B-Instruct";

const weather = {
  name: "get_weather",
  description: "Get the current weather in a city",
  parameters: { type: "object", properties: { city: { type: "string", description: "The city name" } }, required: ["city"] },
};

describe("an on-demand model that nobody pulled", () => {
  let server: RunningServer;
  let emptyModelsDir: string;
  before(async () => {
    emptyModelsDir = mkdtempSync(join(tmpdir(), "switchyard-no-models-"));
    // The default catalog pulls Qwen with the rest; a user catalog marks it on demand, as an operator may.
    const defaults = JSON.parse(readFileSync(join(ROOT, "catalog/models.json"), "utf8")) as { models: Array<{ id: string }> };
    const onDemand = { ...defaults.models.find((m) => m.id === QWEN)!, pull: "on_demand" };
    writeFileSync(join(emptyModelsDir, "catalog.json"), JSON.stringify({ models: [onDemand] }));
    const env = { SWITCHYARD_MODELS_DIR: emptyModelsDir, SWITCHYARD_CATALOG: join(emptyModelsDir, "catalog.json") };
    server = await startServer({ models: [QWEN], env });
  });
  after(async () => {
    await server?.stop();
    rmSync(emptyModelsDir, { recursive: true, force: true });
  });

  test("is listed as not pulled, and a request gets a 503 that says how to pull it; the server is healthy", async () => {
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 200);
    const models = await (await fetch(`${server.baseURL}/models`, { headers: { authorization: `Bearer ${server.key}` } })).json();
    const qwen = models.data.find((m: { id: string }) => m.id === QWEN);
    assert.equal(qwen.metadata.status, "not_pulled");
    assert.deepEqual(qwen.metadata.tags, ["JSON", "Function"]);

    const response = await postChat(server, { model: QWEN, messages: [{ role: "user", content: "Hi" }] });
    assert.equal(response.status, 503);
    const { error } = await response.json();
    assert.equal(error.code, "model_not_pulled");
    assert.match(error.message, /switchyard models pull Qwen\/Qwen2\.5-Coder-0\.5B-Instruct/);
  });
});

describe("Qwen2.5-Coder-0.5B-Instruct, the default assistant, where a capable model matters", () => {
  let server: RunningServer;
  let client: OpenAI;
  before(async () => {
    // The test setup pulls it with the other default models (`switchyard models pull`) into the shared cache.
    server = await startServer({ models: [QWEN] });
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 300_000, maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
  });

  test("answers the README's first request, as written, with colours at least four times in five", async () => {
    // What a newcomer sends first: the alias, the default temperature, no max_tokens. Sampled, so five tries.
    const COLOURS = ["red", "blue", "green", "yellow", "orange", "purple", "black", "white"];
    const answers: Array<{ text: string; colours: string[] }> = [];
    for (let i = 0; i < 5; i++) {
      const reply = await client.chat.completions.create({
        model: "qwen2.5-coder-0.5b",
        messages: [{ role: "user", content: "Name three colours." }],
      });
      assert.equal(reply.model, "qwen2.5-coder-0.5b");
      const text = reply.choices[0]!.message.content!.toLowerCase();
      answers.push({ text, colours: COLOURS.filter((c) => new RegExp(`\\b${c}\\b`).test(text)) });
    }
    const good = answers.filter(({ colours }) => colours.length >= 2).length;
    assert.ok(good >= 4, `two or more colours in only ${good} of 5 answers: ${JSON.stringify(answers)}`);
  });

  test("follows an instruction", async () => {
    const reply = await client.chat.completions.create({
      model: QWEN,
      messages: [{ role: "user", content: "Name three colours. Answer with just the three words." }],
      temperature: 0,
      max_tokens: 30,
    });
    const text = reply.choices[0]!.message.content!.toLowerCase();
    const colours = ["red", "green", "blue", "yellow", "orange", "purple", "black", "white", "pink", "brown"].filter((c) =>
      text.includes(c),
    );
    assert.ok(colours.length >= 3, `three colours in ${JSON.stringify(text)}`);
  });

  test("chooses a tool in auto mode on its own, with the right arguments", async () => {
    const reply = await client.chat.completions.create({
      model: QWEN,
      messages: [{ role: "user", content: "What's the weather like in Paris right now?" }],
      tools: [{ type: "function", function: weather }],
      temperature: 0,
      max_tokens: 80,
    });
    const choice = reply.choices[0]!;
    assert.equal(choice.finish_reason, "tool_calls", JSON.stringify(choice.message));
    const call = choice.message.tool_calls![0]!;
    assert.ok(call.type === "function");
    assert.equal(call.function.name, "get_weather");
    assert.match(JSON.parse(call.function.arguments).city, /paris/i);
  });

  test("a Responses API function-call round trip in auto mode", async () => {
    const tools = [{ type: "function" as const, ...weather, strict: false }];
    const first = await client.responses.create({
      model: QWEN,
      input: "What's the weather like in Paris right now?",
      tools,
      temperature: 0,
      max_output_tokens: 80,
    });
    const call = first.output.find((item) => item.type === "function_call");
    assert.ok(call && call.type === "function_call", JSON.stringify(first.output));
    assert.equal(call.name, "get_weather");
    assert.match(JSON.parse(call.arguments).city, /paris/i);

    const second = await client.responses.create({
      model: QWEN,
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ temperature_celsius: 21, sky: "sunny" }) }],
      tools,
      temperature: 0,
      max_output_tokens: 60,
    });
    assert.equal(second.status, "completed");
    assert.match(second.output_text, /21/, `the answer uses the tool's result: ${second.output_text}`);
  });
});
