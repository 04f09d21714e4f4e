import assert from "node:assert/strict";
import { test } from "node:test";
import { JsonEnd } from "../../src/engine/json-end.js";
import { toolCallGbnf } from "../../src/engine/grammar/index.js";
import { TextStream } from "../../src/engine/text-stream.js";
import { chatRequestSchema } from "../../src/protocol/chat-request.js";
import { mayBeToolCall, parseToolCalls, partialToolCall, toolCallConstraint } from "../../src/serving/tool-calls.js";

const detokenize = (tokens: readonly number[]) => Buffer.from(tokens).toString("utf8");
const bytesOf = (text: string) => [...Buffer.from(text, "utf8")];

test("released tokens follow the text handed out, including text held back for a stop string", () => {
  const stream = new TextStream(detokenize as never, ["END"]);
  let released = 0;
  for (const byte of bytesOf("abE")) {
    stream.push(byte as never);
    released += stream.takeReleasedTokens();
  }
  assert.equal(released, 2, "the E may begin END, so its token is not released yet");
  stream.push(bytesOf("x")[0] as never);
  assert.equal(stream.takeReleasedTokens(), 2, "E and x are released together once E cannot begin END");
});

test("tokens inside a stop string are never released; a multi-byte character releases its tokens together", () => {
  const stream = new TextStream(detokenize as never, ["STOP"]);
  let released = 0;
  for (const byte of bytesOf("é!STOP")) {
    stream.push(byte as never);
    released += stream.takeReleasedTokens();
    if (stream.hitStop) break;
  }
  assert.ok(stream.hitStop);
  assert.equal(released, 3, "é (2 bytes) and ! only");
});

test("the JSON end tracker ignores braces inside strings", () => {
  const end = new JsonEnd();
  assert.equal(end.push('{"a": "}{\\"}"'), false);
  assert.equal(end.push(', "b": [1, {"c": 2}]'), false);
  assert.equal(end.push("}"), true);
});

const tools = [{ name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }];

test("tool calls are read from a JSON object, an array, a <tool_call> wrapper or a code fence", () => {
  for (const text of [
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call>',
    '```json\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n```',
  ]) {
    const calls = parseToolCalls(text, tools);
    assert.ok(calls, text);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.name, "get_weather");
    assert.deepEqual(JSON.parse(calls[0]!.arguments), { city: "Paris" });
    assert.match(calls[0]!.id, /^call_/);
  }
  assert.equal(parseToolCalls('{"name": "other", "arguments": {}}', tools), null);
  assert.equal(parseToolCalls("It is sunny.", tools), null);
  assert.ok(mayBeToolCall('  {"na'));
  assert.ok(mayBeToolCall("<tool"));
  assert.ok(!mayBeToolCall("The weather"));
});

test("a forced call cut short keeps the tool's name and the partial arguments text", () => {
  const two = [...tools, { name: "get_time", parameters: { type: "object", properties: {} } }];
  const cut = partialToolCall('{"name": "get_weather", "arguments": {"city": "Par', two)!;
  assert.equal(cut.length, 1);
  assert.equal(cut[0]!.name, "get_weather");
  assert.equal(cut[0]!.arguments, '{"city": "Par');
  assert.match(cut[0]!.id, /^call_/);
  assert.equal(partialToolCall('{"name":"get_weather","argu', two)![0]!.arguments, "", "no arguments written yet");
  assert.equal(partialToolCall('{"name": "get_w', two)![0]!.name, "get_weather", "a name prefix only one tool has");
  assert.equal(partialToolCall('{"name": "get_', two), null, "a name prefix two tools share");
  assert.equal(partialToolCall("{", two), null);
  assert.deepEqual(
    JSON.parse(partialToolCall('{"name": "get_time", "arguments": {}}', two)![0]!.arguments),
    {},
    "a complete call parses whole",
  );
});

test("a forced call's constraint carries the tools, and its grammar holds each call to a const name", () => {
  const constraint = toolCallConstraint(tools);
  assert.deepEqual(constraint, { type: "tool_call", tools });
  assert.match(toolCallGbnf(tools), /^root ::= "\{\\"name\\":\\"get_weather\\",\\"arguments\\":"/);
});

test("the wire schema checks every sampling parameter's range and names it", () => {
  const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
  const bad: Array<[string, unknown]> = [
    ["temperature", 2.5],
    ["top_p", 0],
    ["top_k", -2],
    ["min_p", 1.5],
    ["presence_penalty", 2.1],
    ["frequency_penalty", -3],
    ["repetition_penalty", 0],
    ["logit_bias", { "12": 101 }],
    ["logit_bias", { abc: 1 }],
    ["n", 9],
    ["n", 0],
    ["top_logprobs", 21],
    ["seed", 1.5],
  ];
  for (const [param, value] of bad) {
    const parsed = chatRequestSchema.safeParse({ ...base, [param]: value, ...(param === "top_logprobs" ? { logprobs: true } : {}) });
    assert.ok(!parsed.success, `${param}=${JSON.stringify(value)} is refused`);
    assert.equal(parsed.error.issues[0]!.path[0], param);
  }
  assert.ok(
    chatRequestSchema.safeParse({
      ...base,
      presence_penalty: -2,
      frequency_penalty: 2,
      top_k: 40,
      min_p: 0.1,
      logit_bias: { "12": -100 },
      n: 8,
      user: "u",
      unknown_field: 1,
    }).success,
  );
});
