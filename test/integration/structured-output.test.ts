import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { postChat, SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

/**
 * Grammar-bound output through the real server and SmolLM2: compact JSON, scalars that end, and
 * schemas refused with a 400 that names the parameter.
 */
const messages = (content: string) => [{ role: "user", content }];

interface Choice {
  finish_reason: string;
  message: { content: string | null; tool_calls?: Array<{ function: { name: string; arguments: string } }> };
}
interface Completion {
  choices: Choice[];
  usage: { completion_tokens: number };
}

/** The whitespace of a JSON text outside its strings, each with the character before it. */
function whitespaceOutsideStrings(text: string): string[] {
  const found: string[] = [];
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (/\s/.test(ch)) found.push(`${text[i - 1] ?? "^"}${ch}`);
  }
  return found;
}

const weather = {
  type: "object",
  properties: { city: { type: "string", maxLength: 24 }, days: { type: "integer" }, unit: { enum: ["celsius", "fahrenheit"] } },
  required: ["city", "days", "unit"],
  additionalProperties: false,
};
const weatherTool = {
  type: "function",
  function: { name: "get_weather", description: "Get the weather forecast for a city", parameters: weather },
};
const otherTool = {
  type: "function",
  function: {
    name: "get_time",
    description: "Get the time in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

describe("structured output: compact, ends where it should, bad schemas are 400s", () => {
  let server: SharedServer;
  before(async () => {
    server = await sharedServer({ exclusive: true });
  });
  after(async () => {
    await server?.stop();
  });

  async function complete(body: Record<string, unknown>): Promise<Completion> {
    const response = await postChat(server, { model: SMOLLM2, ...body });
    const text = await response.text();
    assert.equal(response.status, 200, text);
    return JSON.parse(text) as Completion;
  }

  test("json_schema output parses, validates, and has at most single spaces (after ':' or ','), no newline", async () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 16 },
        hobbies: { type: "array", items: { type: "string", maxLength: 16 }, maxItems: 3 },
        age: { type: "integer" },
      },
      required: ["name", "hobbies", "age"],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const { choices } = await complete({
        messages: messages("Describe a person as JSON."),
        response_format: { type: "json_schema", json_schema: { name: "person", schema } },
        max_tokens: 120,
        seed,
      });
      const choice = choices[0]!;
      assert.equal(choice.finish_reason, "stop", `seed ${seed}: ${JSON.stringify(choice)}`);
      const content = choice.message.content!;
      const value = JSON.parse(content) as { name: string; hobbies: string[]; age: number };
      assert.deepEqual(Object.keys(value), ["name", "hobbies", "age"]);
      assert.ok([...value.name].length <= 16);
      assert.ok(Array.isArray(value.hobbies) && value.hobbies.length <= 3 && value.hobbies.every((h) => typeof h === "string"));
      assert.ok(Number.isInteger(value.age));
      for (const space of whitespaceOutsideStrings(content)) assert.match(space, /^[:,] $/, `seed ${seed}: ${JSON.stringify(content)}`);
      assert.equal(content, content.trim());
    }
  });

  test("json_object output has at most single spaces, no newline", async () => {
    const { choices } = await complete({
      messages: messages("Describe a cat as a JSON object with three fields."),
      response_format: { type: "json_object" },
      max_tokens: 80,
      seed: 4,
    });
    const content = choices[0]!.message.content!;
    if (choices[0]!.finish_reason === "stop") assert.equal(typeof JSON.parse(content), "object");
    for (const space of whitespaceOutsideStrings(content)) assert.match(space, /^[:,] $/, JSON.stringify(content));
  });

  test("a forced tool call has no whitespace outside strings, complete or cut by max_tokens", async () => {
    const { choices } = await complete({
      messages: messages("What's the weather in Paris for the next 3 days?"),
      tools: [weatherTool, otherTool],
      tool_choice: "required",
      max_tokens: 80,
      seed: 5,
    });
    const choice = choices[0]!;
    assert.equal(choice.finish_reason, "tool_calls", JSON.stringify(choice));
    const args = choice.message.tool_calls![0]!.function.arguments;
    assert.deepEqual(whitespaceOutsideStrings(args), []);
    // Cut short, the text the grammar let through is returned as it was generated (as content or
    // as the partial arguments), so its whitespace is the grammar's.
    const cut = await complete({
      messages: messages("What's the weather in Paris for the next 3 days?"),
      tools: [weatherTool],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      max_tokens: 12,
      seed: 5,
    });
    const cutChoice = cut.choices[0]!;
    assert.equal(cutChoice.finish_reason, "length");
    const raw = cutChoice.message.content ?? cutChoice.message.tool_calls?.[0]?.function.arguments ?? "";
    assert.ok(raw.length > 0, JSON.stringify(cutChoice));
    assert.deepEqual(whitespaceOutsideStrings(raw), [], JSON.stringify(raw));
  });

  test("the grammar checks the token drawn and redraws only what it refuses: greedy gives what grammar-first gives", async () => {
    // Without penalties the runner draws first and lets the grammar check that one token; with a
    // penalty (here one that changes no logit beyond the last bits) the grammar runs first over the
    // whole vocabulary. Greedy, the two must agree token for token.
    const schema = { type: "object", properties: { animal: { enum: ["zebra", "quokka", "ibis"] } }, required: ["animal"] };
    const body = {
      messages: messages("Say hello to me, in French."),
      response_format: { type: "json_schema", json_schema: { name: "animal", schema } },
      max_tokens: 40,
      temperature: 0,
      logprobs: true,
      top_logprobs: 1,
    };
    type Logprobs = { logprobs: { content: Array<{ token: string; top_logprobs: Array<{ token: string }> }> } };
    const lazy = (await complete(body)).choices[0]! as Choice & Logprobs;
    const grammarFirst = (await complete({ ...body, repetition_penalty: 1.000001 })).choices[0]! as Choice & Logprobs;
    const answer = JSON.parse(lazy.message.content!) as { animal: string };
    assert.deepEqual(Object.keys(answer), ["animal"]);
    assert.ok(["zebra", "quokka", "ibis"].includes(answer.animal), lazy.message.content!);
    assert.equal(lazy.message.content, grammarFirst.message.content);
    // The model's own first choice was refused somewhere (it would greet, not write this object), so the redraw ran.
    assert.ok(
      lazy.logprobs.content.some((t) => t.top_logprobs[0]!.token !== t.token),
      `some token differs from the unconstrained favourite: ${JSON.stringify(lazy.logprobs.content)}`,
    );
    // Sampled, every seed's output stays within the grammar, with and without a penalty.
    for (const seed of [11, 12]) {
      for (const extra of [{}, { frequency_penalty: 0.5 }]) {
        const { choices } = await complete({ ...body, temperature: 1, seed, logprobs: false, top_logprobs: undefined, ...extra });
        const value = JSON.parse(choices[0]!.message.content!) as { animal: string };
        assert.ok(
          ["zebra", "quokka", "ibis"].includes(value.animal),
          `seed ${seed} ${JSON.stringify(extra)}: ${choices[0]!.message.content}`,
        );
      }
    }
  });

  test("a top-level scalar schema ends generation once the value is complete", async () => {
    const cases: Array<[Record<string, unknown>, string, (value: unknown) => boolean]> = [
      [{ const: "x" }, "Say x.", (v) => v === "x"],
      [{ type: "string" }, "What is the capital of France? Answer with a JSON string.", (v) => typeof v === "string"],
      [{ type: "boolean" }, "Is the sky blue?", (v) => typeof v === "boolean"],
      [{ enum: ["red", "green", "blue"] }, "Name a colour.", (v) => ["red", "green", "blue"].includes(v as string)],
    ];
    for (const [schema, question, valid] of cases) {
      const { choices, usage } = await complete({
        messages: messages(question),
        response_format: { type: "json_schema", json_schema: { name: "answer", schema } },
        max_tokens: 200,
        seed: 6,
      });
      const choice = choices[0]!;
      assert.equal(choice.finish_reason, "stop", `${JSON.stringify(schema)}: ${JSON.stringify(choice)}`);
      assert.ok(valid(JSON.parse(choice.message.content!)), `${JSON.stringify(schema)}: ${choice.message.content}`);
      assert.equal(choice.message.content, choice.message.content!.trim());
      assert.ok(usage.completion_tokens < 100, `${JSON.stringify(schema)} took ${usage.completion_tokens} tokens`);
    }
  });

  test("every schema the grammar cannot hold is a 400 naming the parameter, and the server keeps serving", async () => {
    const deep = (levels: number) => `${'{"type":"object","properties":{"a":'.repeat(levels)}{"type":"string"}${"}}".repeat(levels)}`;
    const format = (schema: string) => `"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${schema}}}`;
    const tools = (parameters: string, choice = '"auto"') =>
      `"tools":[${JSON.stringify(otherTool)},{"type":"function","function":{"name":"f","parameters":${parameters}}}],"tool_choice":${choice}`;
    const forced = '{"type":"function","function":{"name":"f"}}';
    const schemaParam = "response_format.json_schema.schema";
    const toolParam = "tools[1].function.parameters";
    const cases: Array<[string, string, RegExp]> = [
      [format('{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}'), schemaParam, /refers to itself/],
      [
        format('{"$ref":"#/$defs/a","$defs":{"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/a"}},"required":["b"]}}}'),
        schemaParam,
        /can never be finished/,
      ],
      [format('{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}'), schemaParam, /refers to no definition/],
      [format('{"type":"string","minLength":10000000}'), schemaParam, /above the largest supported count/],
      [format('{"type":"array","maxItems":1000000}'), schemaParam, /above the largest supported count/],
      [format('{"type":"array","minItems":3,"maxItems":2}'), schemaParam, /greater than maxItems/],
      [format('{"type":"string","minLength":9,"maxLength":2}'), schemaParam, /greater than maxLength/],
      [format(deep(40)), schemaParam, /nested more than 64 levels/],
      [tools(deep(40)), toolParam, /nested more than 64 levels/],
      [tools(deep(40), forced), toolParam, /nested more than 64 levels/],
      [
        tools('{"type":"object","properties":{"x":{"type":"string","maxLength":1000000}}}', forced),
        toolParam,
        /above the largest supported count/,
      ],
      [tools('{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}', '"required"'), toolParam, /refers to itself/],
    ];
    // Deeper than the body itself may nest (SWITCHYARD_MAX_JSON_DEPTH, 128 levels), a schema is refused at the edge,
    // before any walk over it, naming the field that holds it.
    const tooDeep: Array<[string, string]> = [
      [format(deep(1_000)), "response_format.json_schema"],
      [format(deep(3_000)), "response_format.json_schema"],
      [tools(deep(3_000)), "tools[1]"],
      [tools(deep(3_000), forced), "tools[1]"],
    ];
    for (const [fields, param] of tooDeep) {
      const response = await postChat(
        server,
        `{"model":"${SMOLLM2}","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,${fields}}`,
      );
      const { error } = (await response.json()) as { error: { param: string; code: string } };
      assert.equal(response.status, 400);
      assert.deepEqual([error.param, error.code], [param, "nesting_too_deep"], fields.slice(0, 120));
    }
    for (const [fields, param, message] of cases) {
      const response = await postChat(
        server,
        `{"model":"${SMOLLM2}","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,${fields}}`,
      );
      const text = await response.text();
      assert.equal(response.status, 400, `${fields.slice(0, 120)}: ${text.slice(0, 300)}`);
      const { error } = JSON.parse(text) as { error: { param: string; type: string; code: string; message: string } };
      assert.equal(error.param, param, fields.slice(0, 120));
      assert.equal(error.type, "invalid_request_error");
      assert.equal(error.code, "invalid_schema");
      assert.match(error.message, message);
      assert.ok(error.message.length < 600, `a short message: ${error.message.length} characters`);
    }
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    const after = await complete({
      messages: messages("Hi"),
      response_format: { type: "json_schema", json_schema: { name: "s", schema: { const: "ok" } } },
      max_tokens: 10,
    });
    assert.equal(after.choices[0]!.message.content, '"ok"');
  });
});
