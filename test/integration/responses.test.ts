import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { openDatabase } from "../../src/storage/open.js";
import { adminKey, SMOLLM2, startServer, type RunningServer } from "../helpers/server.js";

const weatherTool = {
  type: "function" as const,
  name: "get_weather",
  description: "Current weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  strict: true,
};

describe("the Responses API on the real SmolLM2 model, through the official client", () => {
  let server: RunningServer;
  let client: OpenAI;
  let stranger: OpenAI;
  const ids: string[] = [];
  before(async () => {
    server = await startServer();
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
    stranger = new OpenAI({ apiKey: await adminKey(server, "stranger"), baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
  });

  test("responses.create: a message item with output_text, status, usage with details and estimated_cost", async () => {
    const { data, response } = await client.responses
      .create({ model: SMOLLM2, instructions: "Answer briefly.", input: "Name three colours.", max_output_tokens: 30 })
      .withResponse();
    ids.push(data.id);
    assert.match(data.id, /^resp_/);
    assert.equal(response.headers.get("x-request-id"), data.id);
    assert.equal(data.object, "response");
    assert.ok(["completed", "incomplete"].includes(data.status!));
    assert.equal(data.model, SMOLLM2);
    assert.equal(data.instructions, "Answer briefly.");
    const message = data.output.find((i) => i.type === "message");
    assert.ok(message && message.type === "message");
    assert.equal(message.role, "assistant");
    assert.equal(message.content[0]!.type, "output_text");
    assert.ok(data.output_text.trim().length > 0, "the SDK's output_text joins the text");
    const usage = data.usage!;
    assert.ok(usage.input_tokens > 5 && usage.output_tokens >= 1 && usage.output_tokens <= 30);
    assert.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens);
    assert.equal(usage.input_tokens_details.cached_tokens, 0);
    assert.equal(usage.output_tokens_details.reasoning_tokens, 0);
    const cost = (usage as unknown as { estimated_cost: number }).estimated_cost;
    assert.equal(cost, (usage.input_tokens * 2 + usage.output_tokens * 6) / 1e8);
  });

  test("max_output_tokens reached: status incomplete with the reason", async () => {
    const data = await client.responses.create({ model: SMOLLM2, input: "Write a long story about a dragon.", max_output_tokens: 3 });
    ids.push(data.id);
    assert.equal(data.status, "incomplete");
    assert.equal(data.incomplete_details?.reason, "max_output_tokens");
    assert.equal(data.usage!.output_tokens, 3);
  });

  test("streaming sends the typed events in order, ending with response.completed", async () => {
    const stream = await client.responses.create({
      model: SMOLLM2,
      input: "Say hello.",
      max_output_tokens: 20,
      temperature: 0,
      stream: true,
    });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    assert.deepEqual(types.slice(0, 4), [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    assert.ok(["response.completed", "response.incomplete"].includes(types.at(-1)!));
    assert.deepEqual(types.slice(-4, -1), ["response.output_text.done", "response.content_part.done", "response.output_item.done"]);
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i),
    );
    const deltas = events.filter((e) => e.type === "response.output_text.delta");
    assert.ok(deltas.length >= 1);
    const final = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    ids.push(final.response.id);
    const message = final.response.output[0]!;
    assert.ok(message.type === "message" && message.content[0]!.type === "output_text");
    assert.equal(deltas.map((d) => d.delta).join(""), message.content[0]!.text);
    const whole = await client.responses.create({ model: SMOLLM2, input: "Say hello.", max_output_tokens: 20, temperature: 0 });
    ids.push(whole.id);
    assert.equal(whole.output_text, message.content[0]!.text, "greedy: the stream says what the plain call says");
  });

  test("a function call round trip: function_call item out, function_call_output in, through previous_response_id and as plain items", async () => {
    const first = await client.responses.create({
      model: SMOLLM2,
      input: "What's the weather in Paris?",
      tools: [weatherTool],
      tool_choice: "required",
      temperature: 0,
    });
    ids.push(first.id);
    const call = first.output.find((i) => i.type === "function_call");
    assert.ok(call && call.type === "function_call", JSON.stringify(first.output));
    assert.equal(call.name, "get_weather");
    assert.match(call.call_id, /^call_/);
    assert.equal(typeof JSON.parse(call.arguments).city, "string");

    const output = {
      type: "function_call_output" as const,
      call_id: call.call_id,
      output: JSON.stringify({ temperature_c: 21, sky: "clear" }),
    };
    const second = await client.responses.create({
      model: SMOLLM2,
      previous_response_id: first.id,
      input: [output],
      tools: [weatherTool],
      tool_choice: "none",
      max_output_tokens: 30,
    });
    ids.push(second.id);
    assert.equal(second.previous_response_id, first.id);
    assert.ok(second.output_text.trim().length > 0);
    const bare = await client.responses.create({
      model: SMOLLM2,
      input: "What's the weather in Paris?",
      tools: [weatherTool],
      tool_choice: "none",
      max_output_tokens: 1,
      store: false,
    });
    ids.push(bare.id);
    assert.ok(second.usage!.input_tokens > bare.usage!.input_tokens + 10, "the call and its output are in the prompt");

    const replay = await client.responses.create({
      model: SMOLLM2,
      input: [
        { role: "user", content: "What's the weather in Paris?" },
        { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
        output,
      ],
      tools: [weatherTool],
      tool_choice: "none",
      max_output_tokens: 30,
      store: false,
    });
    assert.equal(replay.usage!.input_tokens, second.usage!.input_tokens, "the same conversation sent as items renders the same prompt");
    ids.push(replay.id);
  });

  test("a streamed function call: the item is added, its arguments come as delta and done, then the item is done", async () => {
    const stream = await client.responses.create({
      model: SMOLLM2,
      input: "What's the weather in Rome?",
      tools: [weatherTool],
      tool_choice: { type: "function", name: "get_weather" },
      temperature: 0,
      stream: true,
    });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    const added = events.find((e) => e.type === "response.output_item.added");
    assert.ok(added?.type === "response.output_item.added" && added.item.type === "function_call");
    const start = types.indexOf("response.output_item.added");
    assert.deepEqual(types.slice(start, start + 4), [
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
    ]);
    const done = events[start + 2] as OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent;
    assert.equal(done.name, "get_weather");
    assert.equal(typeof JSON.parse(done.arguments).city, "string");
    const final = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    assert.equal(final.type, "response.completed");
    ids.push(final.response.id);
    const item = final.response.output[0]!;
    assert.ok(item.type === "function_call" && item.arguments === done.arguments && item.id === added.item.id);
  });

  test("previous_response_id continues a stored conversation; the instructions do not carry over", async () => {
    const first = await client.responses.create({
      model: SMOLLM2,
      instructions: "You are a pirate. ".repeat(10),
      input: "My name is Ada.",
      max_output_tokens: 10,
    });
    const second = await client.responses.create({
      model: SMOLLM2,
      previous_response_id: first.id,
      input: "What is my name?",
      max_output_tokens: 10,
    });
    const fresh = await client.responses.create({ model: SMOLLM2, input: "What is my name?", max_output_tokens: 10 });
    ids.push(first.id, second.id, fresh.id);
    const earlierTurn = first.usage!.output_tokens + 5;
    assert.ok(second.usage!.input_tokens >= fresh.usage!.input_tokens + earlierTurn, "the earlier turn is in the prompt");
    assert.ok(
      second.usage!.input_tokens < first.usage!.input_tokens + first.usage!.output_tokens + fresh.usage!.input_tokens,
      "the pirate instructions are not",
    );
  });

  test("stored responses: retrieve and delete, scoped to the account; store: false keeps nothing", async () => {
    const made = await client.responses.create({ model: SMOLLM2, input: "Hi", max_output_tokens: 5, metadata: { ticket: "42" } });
    ids.push(made.id);
    const got = await client.responses.retrieve(made.id);
    assert.equal(got.id, made.id);
    assert.deepEqual(got.output, made.output);
    assert.deepEqual(got.metadata, { ticket: "42" });
    assert.equal(JSON.stringify(got.usage), JSON.stringify(made.usage));

    for (const attempt of [() => stranger.responses.retrieve(made.id), () => stranger.responses.delete(made.id)]) {
      const error = await attempt().catch((e: unknown) => e);
      assert.ok(error instanceof OpenAI.NotFoundError, "another account sees nothing");
    }
    const continued = await stranger.responses
      .create({ model: SMOLLM2, previous_response_id: made.id, input: "Hi", max_output_tokens: 2 })
      .catch((e: unknown) => e);
    assert.ok(continued instanceof OpenAI.NotFoundError);
    assert.equal((continued.error as { param: string }).param, "previous_response_id");

    await client.responses.delete(made.id);
    assert.ok((await client.responses.retrieve(made.id).catch((e: unknown) => e)) instanceof OpenAI.NotFoundError);
    assert.ok((await client.responses.delete(made.id).catch((e: unknown) => e)) instanceof OpenAI.NotFoundError);

    const unstored = await client.responses.create({ model: SMOLLM2, input: "Hi", max_output_tokens: 2, store: false });
    ids.push(unstored.id);
    assert.equal((unstored as unknown as { store: boolean }).store, false);
    assert.ok((await client.responses.retrieve(unstored.id).catch((e: unknown) => e)) instanceof OpenAI.NotFoundError);
  });

  test("text.format json_schema binds the output; reasoning.effort and service_tier are applied", async () => {
    const schema = {
      type: "object",
      properties: { colour: { type: "string", enum: ["red", "green", "blue"] } },
      required: ["colour"],
      additionalProperties: false,
    };
    const data = await client.responses.create({
      model: SMOLLM2,
      input: "Pick a colour.",
      text: { format: { type: "json_schema", name: "pick", schema, strict: true } },
      reasoning: { effort: "low" },
      service_tier: "priority",
      max_output_tokens: 60,
    });
    ids.push(data.id);
    assert.ok(["red", "green", "blue"].includes(JSON.parse(data.output_text).colour));
    assert.equal(data.service_tier, "priority");
    assert.equal(data.reasoning?.effort, "low");
  });

  test("the key's budget and rate limit apply as for chat, and a rejection leaves a ledger row", async () => {
    const poor = new OpenAI({
      apiKey: await adminKey(server, "poor", { budget_usd: "0.00000001" }),
      baseURL: server.baseURL,
      timeout: 180_000,
      maxRetries: 0,
    });
    const broke = await poor.responses.create({ model: SMOLLM2, input: "Hi", max_output_tokens: 50 }).catch((e: unknown) => e);
    assert.ok(broke instanceof OpenAI.APIError && broke.status === 402, String(broke));
    ids.push(broke.requestID!);
    const limited = new OpenAI({
      apiKey: await adminKey(server, "limited", { rpm_limit: 1 }),
      baseURL: server.baseURL,
      timeout: 180_000,
      maxRetries: 0,
    });
    ids.push((await limited.responses.create({ model: SMOLLM2, input: "Hi", max_output_tokens: 2 })).id);
    const second = await limited.responses.create({ model: SMOLLM2, input: "Hi", max_output_tokens: 2 }).catch((e: unknown) => e);
    assert.ok(second instanceof OpenAI.RateLimitError);
    ids.push(second.requestID!);
  });

  test("bad input is a 400 naming the parameter", async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ input: [] }, /^input$/],
      [{ tools: [{ type: "web_search" }] }, /^tools/],
      [{ tool_choice: "required" }, /^tool_choice$/],
      [{ temperature: 3 }, /^temperature$/],
      [{ metadata: { k: "v".repeat(600) } }, /^metadata/],
      [{ input: "word ".repeat(9000) }, /^input$/],
    ];
    for (const [extra, param] of cases) {
      const error = await client.responses.create({ model: SMOLLM2, input: "Hi", ...extra } as never).catch((e: unknown) => e);
      assert.ok(error instanceof OpenAI.BadRequestError, JSON.stringify(extra));
      assert.match((error.error as { param: string }).param, param);
    }
  });

  test("the ledger has one row per response, marked as the Responses API", async () => {
    server.process.kill("SIGTERM");
    await new Promise((resolve) => server.process.once("exit", resolve));
    const db = await openDatabase({ dataDir: server.dataDir });
    try {
      const rows = await db.query<{ request_id: string; api: string }>(
        "SELECT request_id, api FROM usage_records WHERE request_id = ANY($1)",
        [ids],
      );
      assert.equal(rows.length, new Set(ids).size);
      assert.ok(rows.every((r) => r.api === "responses"));
    } finally {
      await db.close();
    }
  });
});
