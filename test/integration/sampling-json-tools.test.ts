import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { request as httpRequest } from "node:http";
import { GEMMA, postChat, readSse, SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";
import { ask } from "../helpers/requests.js";

/** Parameters, n, logprobs, JSON output and tool calls against the real SmolLM2 (and Gemma for the capability gate). */
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather for a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 24 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
};

interface TopLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}
interface TokenLogprob extends TopLogprob {
  top_logprobs: TopLogprob[];
}

function checkLogprobs(tokens: TokenLogprob[], top: number): void {
  assert.ok(tokens.length > 0);
  for (const t of tokens) {
    assert.equal(typeof t.token, "string");
    assert.ok(Number.isFinite(t.logprob) && t.logprob <= 0, `logprob ${t.logprob} <= 0`);
    assert.deepEqual(t.bytes, [...Buffer.from(t.token, "utf8")]);
    assert.ok(t.top_logprobs.length <= top);
    const mass = t.top_logprobs.reduce((sum, a) => sum + Math.exp(a.logprob), 0);
    assert.ok(mass <= 1 + 1e-4, `top_logprobs mass ${mass} <= 1`);
    for (const a of t.top_logprobs) assert.ok(a.logprob <= 0);
    for (let i = 1; i < t.top_logprobs.length; i++)
      assert.ok(t.top_logprobs[i - 1]!.logprob >= t.top_logprobs[i]!.logprob, "most likely first");
  }
}

/** Runs `count` tasks with at most `limit` at once; results in task order. */
/** POST over node:http, whose only timeout is the one given (no fixed headers timeout as fetch has). */
function postJsonSlowly(url: string, key: string, body: unknown, timeoutMs: number): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      url,
      {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        signal: AbortSignal.timeout(timeoutMs),
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => (text += chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, text }));
        response.on("error", reject);
      },
    );
    request.on("error", reject);
    request.end(JSON.stringify(body));
  });
}

async function pool<T>(count: number, limit: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}

describe("sampling, n, logprobs, JSON output and tools", () => {
  let server: SharedServer;
  before(async () => {
    server = await sharedServer({ models: [SMOLLM2, GEMMA], exclusive: true });
  });
  after(async () => {
    await server?.stop();
  });

  test("out-of-range parameters are a 400 naming the parameter", async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ temperature: 2.5 }, "temperature"],
      [{ top_p: 0 }, "top_p"],
      [{ top_k: -5 }, "top_k"],
      [{ min_p: 1.5 }, "min_p"],
      [{ presence_penalty: 2.5 }, "presence_penalty"],
      [{ frequency_penalty: -2.5 }, "frequency_penalty"],
      [{ repetition_penalty: 0 }, "repetition_penalty"],
      [{ logit_bias: { "100": 150 } }, "logit_bias.100"],
      [{ logit_bias: { "99999999": 5 } }, "logit_bias"],
      [{ n: 9 }, "n"],
      [{ logprobs: true, top_logprobs: 21 }, "top_logprobs"],
      [{ top_logprobs: 2 }, "top_logprobs"],
      [{ response_format: { type: "xml" } }, "response_format.type"],
      [
        {
          response_format: {
            type: "json_schema",
            json_schema: { name: "x", schema: { type: "object", properties: { n: { type: "integer", minimum: 5, maximum: 1 } } } },
          },
        },
        "response_format.json_schema.schema",
      ],
      [{ tool_choice: "required" }, "tool_choice"],
      [{ tools: [weatherTool], tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice"],
    ];
    for (const [extra, param] of cases) {
      const response = await postChat(server, ask("Hi", { max_tokens: 2, ...extra }));
      const body = (await response.json()) as { error: { param: string; type: string } };
      assert.equal(response.status, 400, `${JSON.stringify(extra)}: ${JSON.stringify(body)}`);
      assert.equal(body.error.param, param, JSON.stringify(extra));
      assert.equal(body.error.type, "invalid_request_error");
    }
  });

  test("capabilities: JSON output on Gemma works, tools on Gemma and images anywhere without Multimodal are 400s", async () => {
    const tools = await postChat(server, {
      model: GEMMA,
      messages: [{ role: "user", content: "Hi" }],
      tools: [weatherTool],
      max_tokens: 2,
    });
    const toolsBody = (await tools.json()) as { error: { param: string; message: string } };
    assert.equal(tools.status, 400);
    assert.equal(toolsBody.error.param, "tools");
    assert.match(toolsBody.error.message, /function calling/);
    const image = await postChat(
      server,
      ask("", {
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "What is this?" },
              { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
            ],
          },
        ],
        max_tokens: 2,
      }),
    );
    const imageBody = (await image.json()) as { error: { message: string } };
    assert.equal(image.status, 400);
    assert.match(imageBody.error.message, /Multimodal/);
    const json = await postChat(server, {
      model: GEMMA,
      messages: [{ role: "user", content: "A JSON object:" }],
      response_format: { type: "json_object" },
      max_tokens: 30,
    });
    assert.equal(json.status, 200);
  });

  test("the same seed with top_k, min_p and penalties gives the same output; unknown parameters and user are accepted", async () => {
    const params = {
      seed: 42,
      temperature: 1.2,
      top_k: 30,
      min_p: 0.05,
      presence_penalty: 0.8,
      frequency_penalty: 0.6,
      repetition_penalty: 1.2,
      logit_bias: { "30": -100, "31": 3 },
      user: "u-1",
      some_future_field: true,
      max_tokens: 12,
    };
    const texts = [];
    // An account of its own: the first request computes the prompt cold, the second from its
    // cache, and no other test's cells are involved (see README, Chat parameters, `seed`).
    const { key } = await server.newKey("seeded");
    for (let i = 0; i < 2; i++) {
      const response = await postChat(server, ask("Write about the sea.", params), { key });
      assert.equal(response.status, 200);
      const body = (await response.json()) as { choices: Array<{ message: { content: string } }> };
      texts.push(body.choices[0]!.message.content);
    }
    assert.ok(texts[0]!.length > 0);
    assert.equal(texts[0], texts[1]);
  });

  test("n=3 gives three indexed choices, with logprobs, and usage counts every completion token once", async () => {
    const response = await postChat(server, ask("Name a colour.", { n: 3, max_tokens: 6, seed: 7, logprobs: true, top_logprobs: 3 }));
    assert.equal(response.status, 200);
    const body = (await response.json()) as {
      choices: Array<{ index: number; finish_reason: string; message: { content: string }; logprobs: { content: TokenLogprob[] } }>;
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    assert.deepEqual(
      body.choices.map((c) => c.index),
      [0, 1, 2],
    );
    let tokens = 0;
    for (const choice of body.choices) {
      assert.ok(["stop", "length"].includes(choice.finish_reason));
      checkLogprobs(choice.logprobs.content, 3);
      if (/^[\x20-\x7e\n]*$/.test(choice.message.content))
        assert.equal(choice.logprobs.content.map((t) => t.token).join(""), choice.message.content);
      tokens += choice.logprobs.content.length;
    }
    // No stop strings, so every generated token is in the logprobs (an end-of-text token is not counted).
    assert.equal(body.usage.completion_tokens, tokens);
  });

  test("a stream with n=2 and logprobs: chunks carry their choice index and the logprobs of their text", async () => {
    const response = await postChat(
      server,
      ask("Name a fruit.", { n: 2, stream: true, max_tokens: 6, logprobs: true, top_logprobs: 2, stream_options: { include_usage: true } }),
    );
    assert.equal(response.status, 200);
    const events = await readSse(response);
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    const finished = new Map<number, string>();
    const tokens = new Map<number, TokenLogprob[]>();
    const texts = new Map<number, string>();
    for (const chunk of chunks) {
      for (const choice of chunk.choices) {
        if (choice.finish_reason) finished.set(choice.index, choice.finish_reason);
        if (typeof choice.delta.content === "string") {
          texts.set(choice.index, (texts.get(choice.index) ?? "") + choice.delta.content);
          tokens.set(choice.index, [...(tokens.get(choice.index) ?? []), ...choice.logprobs.content]);
        }
      }
    }
    assert.deepEqual([...finished.keys()].sort(), [0, 1]);
    const usage = chunks.at(-1).usage;
    let total = 0;
    for (const index of [0, 1]) {
      checkLogprobs(tokens.get(index)!, 2);
      const text = texts.get(index)!;
      // A generation cut by max_tokens inside a multi-byte character ends with that token's partial
      // bytes (shown as U+FFFD in its logprob), which the text leaves out.
      if (/^[\x20-\x7e\n]*$/.test(text))
        assert.equal(
          tokens
            .get(index)!
            .map((t) => t.token)
            .join("")
            .replace(/\uFFFD+$/, ""),
          text,
        );
      total += tokens.get(index)!.length;
    }
    assert.equal(usage.completion_tokens, total);
  });

  test("a stop string: the logprobs cover the text returned, not the stop string", async () => {
    const response = await postChat(
      server,
      ask("Count: 1, 2, 3, 4, 5, 6", { max_tokens: 20, temperature: 0, stop: [","], logprobs: true }),
    );
    const body = (await response.json()) as { choices: Array<{ message: { content: string }; logprobs: { content: TokenLogprob[] } }> };
    const choice = body.choices[0]!;
    assert.ok(!choice.message.content.includes(","));
    if (choice.message.content.length > 0) assert.ok(choice.logprobs.content.length > 0);
    for (const t of choice.logprobs.content) assert.ok(!t.token.includes(",") || choice.message.content.length > 0);
    assert.ok(
      choice.logprobs.content
        .map((t) => t.token)
        .join("")
        .startsWith(choice.message.content.slice(0, 1)),
    );
  });

  test("json_object output parses", async () => {
    const response = await postChat(
      server,
      ask("Describe a cat as a JSON object.", { response_format: { type: "json_object" }, max_tokens: 60, seed: 1 }),
    );
    const body = (await response.json()) as { choices: Array<{ message: { content: string }; finish_reason: string }> };
    const choice = body.choices[0]!;
    if (choice.finish_reason === "stop") {
      const value = JSON.parse(choice.message.content);
      assert.equal(typeof value, "object");
    } else assert.equal(choice.finish_reason, "length");
  });

  test("50 concurrent json_schema requests all parse and validate", async () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 12 },
        age: { type: "integer" },
        pet: { enum: ["cat", "dog", "none"] },
        ok: { type: "boolean" },
      },
      required: ["name", "age", "pet", "ok"],
      additionalProperties: false,
    };
    // The test asserts behaviour, not speed: at most 8 in flight (the server's sequences, so none
    // queues), and a client whose only timeout is an explicit, generous one. fetch would
    // give up on a non-streamed answer after undici's fixed 300 s headers timeout, which a busy,
    // slow machine can reach.
    const results = await pool(50, 8, async (i) => {
      const body = ask(`Person number ${i} as JSON.`, {
        response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
        max_tokens: 60,
        seed: i,
      });
      const response = await postJsonSlowly(`${server.baseURL}/chat/completions`, server.key, body, 20 * 60_000);
      assert.equal(response.status, 200, response.text);
      return (JSON.parse(response.text) as { choices: Array<{ message: { content: string }; finish_reason: string }> }).choices[0]!;
    });
    let parsed = 0;
    for (const choice of results) {
      if (choice.finish_reason === "length") continue;
      assert.equal(choice.finish_reason, "stop");
      const value = JSON.parse(choice.message.content) as Record<string, unknown>;
      assert.deepEqual(Object.keys(value).sort(), ["age", "name", "ok", "pet"]);
      assert.equal(typeof value.name, "string");
      // JSON Schema's maxLength counts code points (an emoji is one), not UTF-16 units.
      assert.ok([...(value.name as string)].length <= 12, `name ${JSON.stringify(value.name)} within maxLength`);
      assert.ok(Number.isInteger(value.age));
      assert.ok(["cat", "dog", "none"].includes(value.pet as string));
      assert.equal(typeof value.ok, "boolean");
      parsed++;
    }
    assert.ok(parsed >= 45, `${parsed} of 50 finished within max_tokens`);
  });

  test("a forced tool call is grammar-bound: its arguments parse and validate, in JSON and in a stream", async () => {
    const response = await postChat(
      server,
      ask("What's the weather in Paris?", {
        tools: [weatherTool],
        tool_choice: { type: "function", function: { name: "get_weather" } },
        max_tokens: 80,
      }),
    );
    const body = (await response.json()) as {
      choices: Array<{
        finish_reason: string;
        message: { content: string | null; tool_calls: Array<{ id: string; type: string; function: { name: string; arguments: string } }> };
      }>;
    };
    const choice = body.choices[0]!;
    assert.equal(choice.finish_reason, "tool_calls");
    const [call] = choice.message.tool_calls;
    assert.match(call!.id, /^call_/);
    assert.equal(call!.type, "function");
    assert.equal(call!.function.name, "get_weather");
    const args = JSON.parse(call!.function.arguments) as { city: string; unit: string };
    assert.equal(typeof args.city, "string");
    assert.ok(["celsius", "fahrenheit"].includes(args.unit));

    const stream = await postChat(
      server,
      ask("What's the weather in Rome?", { tools: [weatherTool], tool_choice: "required", max_tokens: 80, stream: true }),
    );
    const chunks = (await readSse(stream)).slice(0, -1).map((e) => JSON.parse(e));
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    assert.equal(deltas[0].function.name, "get_weather");
    assert.match(deltas[0].id, /^call_/);
    JSON.parse(deltas.map((d: { function: { arguments: string } }) => d.function.arguments).join(""));
    assert.equal(chunks.at(-1).choices[0].finish_reason, "tool_calls");
  });

  // The forced variant of the round trip: `required` binds the first turn to the call grammar.
  test("a tool-call round trip with the openai client: call, tool result, final answer", async () => {
    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL });
    const tools = [
      {
        type: "function" as const,
        function: {
          name: "get_weather",
          description: "Get the current weather for a city",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    ];
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: "user", content: "Call the get_weather tool for Paris." },
    ];
    const first = await client.chat.completions.create({
      model: SMOLLM2,
      messages,
      tools,
      tool_choice: "required",
      temperature: 0,
      max_tokens: 40,
    });
    const choice = first.choices[0]!;
    assert.equal(choice.finish_reason, "tool_calls", `the model answered: ${JSON.stringify(choice.message)}`);
    const call = choice.message.tool_calls![0]!;
    assert.equal(call.type, "function");
    if (call.type !== "function") return;
    assert.equal(call.function.name, "get_weather");
    assert.equal(typeof JSON.parse(call.function.arguments), "object");
    messages.push(choice.message, {
      role: "tool",
      tool_call_id: call.id,
      content: JSON.stringify({ city: "Paris", temperature_c: 21, sky: "sunny" }),
    });
    const second = await client.chat.completions.create({
      model: SMOLLM2,
      messages,
      tools,
      tool_choice: "auto",
      temperature: 0,
      max_tokens: 30,
    });
    const answer = second.choices[0]!;
    assert.ok(["stop", "length", "tool_calls"].includes(answer.finish_reason));
    assert.ok((answer.message.content ?? "").trim().length > 0 || (answer.message.tool_calls?.length ?? 0) > 0);
  });

  // Under `auto` nothing forces the call: the model chooses it. SmolLM2-135M answers a bare weather
  // question in prose, but with one worked example earlier in the conversation (a call of a
  // different tool, its result and the answer, as a client's few-shot history) it calls the offered
  // tool itself, in its trained `<tool_call>[...]</tool_call>` format, and answers from the result.
  test("an auto tool-call round trip with the openai client: the model chooses the call, gets the result, answers", async () => {
    // An account of its own: no prefix cached by the other tests, whose cells were computed in
    // other batches; a 135M model's greedy choice can turn on the last bits of a logit.
    const client = new OpenAI({ apiKey: (await server.newKey("auto-tools")).key, baseURL: server.baseURL });
    const cityParameters = {
      type: "object",
      properties: { city: { type: "string", description: "The city name" } },
      required: ["city"],
      additionalProperties: false,
    };
    const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
      {
        type: "function",
        function: { name: "get_weather", description: "Get the current weather for a city", parameters: cityParameters },
      },
      { type: "function", function: { name: "get_time", description: "Get the current local time in a city", parameters: cityParameters } },
    ];
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: "user", content: "What time is it in Tokyo?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_example", type: "function", function: { name: "get_time", arguments: '{"city":"Tokyo"}' } }],
      },
      { role: "tool", tool_call_id: "call_example", content: '{"city":"Tokyo","time":"14:05"}' },
      { role: "assistant", content: "It is 14:05 in Tokyo." },
      { role: "user", content: "What's the weather in Paris?" },
    ];
    const settings = { model: SMOLLM2, tools, tool_choice: "auto" as const, temperature: 0, seed: 3, max_tokens: 60 };
    const first = await client.chat.completions.create({ ...settings, messages });
    const choice = first.choices[0]!;
    assert.equal(choice.finish_reason, "tool_calls", `the model answered: ${JSON.stringify(choice.message)}`);
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls?.length, 1);
    const call = choice.message.tool_calls![0]!;
    assert.ok(call.type === "function");
    assert.match(call.id, /^call_/);
    // The model picked the tool that fits the question, and its arguments validate against the schema.
    assert.equal(call.function.name, "get_weather");
    const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
    assert.deepEqual(Object.keys(args), ["city"]);
    assert.equal(typeof args.city, "string");
    assert.ok((args.city as string).length > 0);

    // The same turn streamed: one tool_calls fragment with the whole call, then the tool_calls finish.
    const stream = await client.chat.completions.create({ ...settings, messages, stream: true });
    const fragments: OpenAI.Chat.Completions.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    let streamedFinish: string | null = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        fragments.push(...(c.delta.tool_calls ?? []));
        streamedFinish = c.finish_reason ?? streamedFinish;
      }
    }
    assert.equal(streamedFinish, "tool_calls");
    assert.equal(fragments.length, 1);
    assert.equal(fragments[0]!.function?.name, call.function.name);
    assert.deepEqual(JSON.parse(fragments[0]!.function!.arguments!), args);

    messages.push(choice.message, {
      role: "tool",
      tool_call_id: call.id,
      content: JSON.stringify({ city: args.city, temperature_c: 21, sky: "sunny" }),
    });
    const second = await client.chat.completions.create({ ...settings, messages });
    const answer = second.choices[0]!;
    assert.equal(answer.finish_reason, "stop", `the model answered: ${JSON.stringify(answer.message)}`);
    assert.equal(answer.message.tool_calls, undefined);
    assert.ok((answer.message.content ?? "").trim().length > 0);
  });
});
