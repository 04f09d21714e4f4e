import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

/**
 * Usage follows what was delivered when a prediction is exact but the output is cut short: by a
 * stop string, by max_tokens, by a JSON grammar's end, with n > 1, streamed or not (the probe of
 * issue 54: 35 tokens output, billed 43, 40 of them "accepted"). Draft tokens past the end were
 * right, so they are neither accepted nor rejected: the usage is the one without the prediction.
 */
const colours = {
  model: SMOLLM2,
  messages: [{ role: "user" as const, content: "Name three colours." }],
  temperature: 0,
  max_tokens: 60,
};

type Body = OpenAI.ChatCompletionCreateParamsNonStreaming;
interface Delivered {
  contents: string[];
  usage: OpenAI.CompletionUsage;
}

/** A word of the answer's second half that first occurs there: a stop string that cuts it. */
function stopWordOf(answer: string): string {
  const words = answer.match(/[A-Za-z]{4,}/g) ?? [];
  const word = words.find((w, i) => i >= words.length / 2 && answer.indexOf(w) > answer.length / 3);
  assert.ok(word, `no stop word in ${JSON.stringify(answer)}`);
  return word;
}

describe("prediction counts follow the delivered output (real SmolLM2, temperature 0)", () => {
  let server: SharedServer;
  let client: OpenAI;
  before(async () => {
    server = await sharedServer({ exclusive: true });
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
  });

  async function ask(body: Body, stream: boolean): Promise<Delivered> {
    if (!stream) {
      const reply = await client.chat.completions.create(body);
      return { contents: reply.choices.map((c) => c.message.content ?? ""), usage: reply.usage! };
    }
    const chunks = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const contents: string[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of chunks) {
      for (const choice of chunk.choices) contents[choice.index] = (contents[choice.index] ?? "") + (choice.delta.content ?? "");
      if (chunk.usage) usage = chunk.usage;
    }
    assert.ok(usage, "a usage chunk");
    return { contents, usage };
  }

  /**
   * With `prediction`, `body` delivers what it does without one, and is billed for that and the
   * rejected prediction tokens alone; `exact`: the prediction is the answer's own tokens, so none is rejected.
   */
  async function assertBilledAsDelivered(body: Body, prediction: string, label: string, exact = true): Promise<void> {
    const plain = await ask(body, false);
    for (const stream of [false, true]) {
      const predicted = await ask({ ...body, prediction: { type: "content", content: prediction } }, stream);
      const what = `${label}, stream ${stream}: ${JSON.stringify(predicted.usage)}`;
      assert.deepEqual(predicted.contents, plain.contents, what);
      const { accepted_prediction_tokens: accepted, rejected_prediction_tokens: rejected } = predicted.usage.completion_tokens_details!;
      assert.ok(accepted! <= plain.usage.completion_tokens, what);
      if (exact) assert.equal(rejected, 0, what);
      assert.equal(predicted.usage.completion_tokens, plain.usage.completion_tokens + rejected!, what);
      assert.equal(predicted.usage.total_tokens, predicted.usage.prompt_tokens + predicted.usage.completion_tokens, what);
    }
  }

  test("a stop string, max_tokens and n > 1 cut an exact prediction: usage is the output's, nothing rejected", async () => {
    const full = await client.chat.completions.create(colours);
    const answer = full.choices[0]!.message.content!;
    assert.ok(full.usage!.completion_tokens >= 12, `a long enough answer: ${JSON.stringify(answer)}`);
    const stop = stopWordOf(answer);
    await assertBilledAsDelivered({ ...colours, stop: [stop] }, answer, `stop ${stop}`);
    await assertBilledAsDelivered({ ...colours, stop: [stop], n: 2 }, answer, `stop ${stop}, n 2`);
    await assertBilledAsDelivered({ ...colours, max_tokens: Math.ceil(full.usage!.completion_tokens / 2) }, answer, "max_tokens");
  });

  test("a JSON grammar's end cuts a prediction that goes on past it: usage is the output's and the rejected tokens", async () => {
    const json = { ...colours, messages: [{ role: "user" as const, content: "Name three colours as a JSON object." }] };
    const body: Body = { ...json, response_format: { type: "json_object" } };
    const value = (await client.chat.completions.create(body)).choices[0]!.message.content!;
    // The value's text tokenized again need not be the tokens the grammar let the model write, so
    // some of it may be rejected; what goes on past the value's end is cut by the grammar, never billed.
    await assertBilledAsDelivered(body, `${value}\n\nThese are three colours: red, green and blue.`, "json_object", false);
  });
});
