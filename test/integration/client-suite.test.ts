import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, streamText } from "ai";
import OpenAI from "openai";
import { zodFunction, zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import { SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

/**
 * What real JavaScript clients send, end to end against the real model: openai-node's zod helpers
 * (zod v4 writes `.int()` with the safe-integer bounds), tools, streaming and the Responses API,
 * and the Vercel AI SDK over both the chat and the Responses API.
 */
const Person = z.object({
  name: z.string().max(20),
  age: z.int(),
  rating: z.int().min(1).max(5),
  tags: z.array(z.string().max(10)).max(2),
});
const Weather = z.object({ city: z.string().max(20), days: z.int().min(1).max(7) });

describe("the client suite: openai-node and the AI SDK against the real SmolLM2", () => {
  let server: SharedServer;
  let client: OpenAI;
  before(async () => {
    server = await sharedServer();
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
  });

  const checkPerson = (person: z.infer<typeof Person> | null | undefined) => {
    assert.ok(person, "parsed");
    assert.ok(Number.isSafeInteger(person.age));
    assert.ok(Number.isInteger(person.rating) && person.rating >= 1 && person.rating <= 5, `rating ${person.rating}`);
  };

  test("chat.completions.parse with zodResponseFormat: integer fields, safe-integer bounds included", async () => {
    const completion = await client.chat.completions.parse({
      model: SMOLLM2,
      messages: [{ role: "user", content: "Describe a person as JSON: name, age, rating from 1 to 5, tags." }],
      response_format: zodResponseFormat(Person, "person"),
      max_tokens: 120,
      temperature: 0.7,
      seed: 7,
    });
    assert.equal(completion.choices[0]!.finish_reason, "stop");
    checkPerson(completion.choices[0]!.message.parsed);
  });

  test("responses.parse with zodTextFormat, then input_items paginated, retrieve with stream is a 400", async () => {
    const response = await client.responses.parse({
      model: SMOLLM2,
      input: "Describe a person.",
      text: { format: zodTextFormat(Person, "person") },
      max_output_tokens: 120,
      temperature: 0.7,
    });
    checkPerson(response.output_parsed);
    const next = await client.responses.create({
      model: SMOLLM2,
      previous_response_id: response.id,
      input: [{ role: "user", content: "And another one?" }],
      max_output_tokens: 8,
    });
    const items = await client.responses.inputItems.list(next.id, { order: "asc" });
    assert.deepEqual(
      items.data.map((i) => i.type),
      ["message", "message", "message"],
      "the earlier input, its output, this input",
    );
    const [earlierInput, earlierOutput, thisInput] = items.data as Array<{
      id: string;
      role: string;
      content: Array<{ type: string; text: string }>;
    }>;
    assert.equal(earlierInput!.content[0]!.text, "Describe a person.");
    assert.equal(earlierOutput!.role, "assistant");
    assert.equal(earlierOutput!.id, response.output.find((o) => o.type === "message")!.id);
    assert.deepEqual(
      [thisInput!.role, thisInput!.content[0]!.type, thisInput!.content[0]!.text],
      ["user", "input_text", "And another one?"],
    );
    const newestFirst = await client.responses.inputItems.list(next.id, { limit: 1 });
    assert.deepEqual([newestFirst.data[0]!.id, newestFirst.has_more], [thisInput!.id, true]);
    const all: string[] = [];
    for await (const item of client.responses.inputItems.list(next.id, { limit: 1 })) all.push(item.id!);
    assert.deepEqual(all, [thisInput!.id, earlierOutput!.id, earlierInput!.id], "the SDK pages through with after");

    const streamed = await client.responses.retrieve(next.id, { stream: true }).then(
      () => assert.fail("expected a 400"),
      (error: unknown) => error,
    );
    assert.ok(streamed instanceof OpenAI.BadRequestError);
    assert.equal(streamed.param, "stream");
  });

  test("a bad text.format schema names text.format.schema in param and message", async () => {
    const error = await client.responses
      .create({
        model: SMOLLM2,
        input: "x",
        text: { format: { type: "json_schema", name: "bad", schema: { type: "string", pattern: "^a" } } },
      })
      .catch((e: unknown) => e);
    assert.ok(error instanceof OpenAI.BadRequestError);
    assert.equal(error.param, "text.format.schema");
    assert.match(error.message, /'text\.format\.schema'/);
    assert.doesNotMatch(error.message, /response_format/);
  });

  test("a number keyword checked after generation: an output that breaks it is a 500 schema_violation, billed as generated", async () => {
    // Only 0.5 is in range, and it is no multiple of 0.3: every output breaks the schema.
    const schema = {
      type: "object",
      properties: { x: { type: "number", minimum: 0.5, maximum: 0.5, multipleOf: 0.3 } },
      required: ["x"],
      additionalProperties: false,
    };
    const error = await client.chat.completions
      .create({
        model: SMOLLM2,
        messages: [{ role: "user", content: "x?" }],
        response_format: { type: "json_schema", json_schema: { name: "x", schema, strict: true } },
        max_tokens: 40,
      })
      .catch((e: unknown) => e);
    assert.ok(error instanceof OpenAI.InternalServerError, String(error));
    assert.equal(error.code, "schema_violation");
    assert.match(error.message, /'x' \(.+\) is (below|above|not a multiple)/);
  });

  test("tools: a forced call parsed with zodFunction, integer arguments in range; and a streamed call", async () => {
    const completion = await client.chat.completions.parse({
      model: SMOLLM2,
      messages: [{ role: "user", content: "What is the weather in Paris for the next 3 days?" }],
      tools: [zodFunction({ name: "get_weather", parameters: Weather })],
      tool_choice: "required",
      max_tokens: 60,
    });
    const call = completion.choices[0]!.message.tool_calls?.[0];
    assert.equal(call?.type, "function");
    const args = call?.type === "function" ? (call.function.parsed_arguments as z.infer<typeof Weather> | null) : null;
    assert.ok(args && Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, JSON.stringify(args));

    const stream = client.chat.completions.stream({
      model: SMOLLM2,
      messages: [{ role: "user", content: "Weather in Oslo for two days?" }],
      tools: [zodFunction({ name: "get_weather", parameters: Weather })],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      max_tokens: 60,
    });
    const final = await stream.finalChatCompletion();
    const streamedCall = final.choices[0]!.message.tool_calls?.[0];
    assert.equal(streamedCall?.type === "function" && streamedCall.function.name, "get_weather");
    assert.equal(final.choices[0]!.finish_reason, "tool_calls");
  });

  test("streaming: chat deltas and Responses events through the SDK's stream helpers", async () => {
    const chat = client.chat.completions.stream({
      model: SMOLLM2,
      messages: [{ role: "user", content: "Name a fruit." }],
      max_tokens: 12,
      stream_options: { include_usage: true },
    });
    let deltas = "";
    chat.on("content", (delta) => (deltas += delta));
    const done = await chat.finalChatCompletion();
    assert.equal(done.choices[0]!.message.content, deltas);
    assert.ok(done.usage && done.usage.completion_tokens >= 1);

    const responses = client.responses.stream({ model: SMOLLM2, input: "Name a fruit.", max_output_tokens: 12 });
    let text = "";
    responses.on("response.output_text.delta", (event) => (text += event.delta));
    const response = await responses.finalResponse();
    assert.equal(response.output_text, text);
  });

  test("the AI SDK: generateObject with integers over chat and over Responses, streamText", async () => {
    const provider = createOpenAI({ apiKey: server.key, baseURL: server.baseURL });
    for (const model of [provider.chat(SMOLLM2), provider.responses(SMOLLM2)]) {
      const { object } = await generateObject({ model, schema: Person, prompt: "Describe a person.", maxOutputTokens: 120, maxRetries: 0 });
      checkPerson(object);
    }
    const streamed = streamText({ model: provider.chat(SMOLLM2), prompt: "Name a colour.", maxOutputTokens: 12, maxRetries: 0 });
    let text = "";
    for await (const part of streamed.textStream) text += part;
    assert.equal(text, await streamed.text);
    assert.ok((await streamed.usage).outputTokens! >= 1);
  });
});
