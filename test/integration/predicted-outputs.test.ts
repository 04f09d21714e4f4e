import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { BATCH_PRICES, resultLines, settled, upload } from "../helpers/batches.js";
import { requestCost } from "../../src/billing/cost.js";
import { FULL_CONTEXT, SMOLLM2 } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";
import { smolStandardUnits } from "../helpers/usage.js";

/**
 * OpenAI's Predicted Outputs on the real server and model, through the official client: the
 * parameter on every alias of the route, in streams and in Batch API lines; the usage OpenAI
 * reports, billed (rejected prediction tokens as completion tokens) and on the ledger to the digit.
 */
const TEXT = "The quick brown fox jumps over the lazy dog near the river bank, and the dog does not wake up.";
/** At temperature 0 SmolLM2 answers this with 48 tokens of prose: room for the engine to draft. */
const rivers = {
  model: SMOLLM2,
  messages: [{ role: "user" as const, content: "Write a short paragraph about rivers." }],
  temperature: 0,
  max_tokens: 48,
};

interface Details {
  reasoning_tokens: number;
  accepted_prediction_tokens: number;
  rejected_prediction_tokens: number;
}
interface Totals {
  requests: number;
  completion_tokens: number;
  accepted_prediction_tokens: number;
  rejected_prediction_tokens: number;
  cost_usd: number;
}

describe("Predicted Outputs (`prediction`) against the real SmolLM2 model", () => {
  let server: SharedServer;
  let client: OpenAI;
  before(async () => {
    server = await sharedServer({ env: FULL_CONTEXT, exclusive: true });
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
  });

  const post = (prefix: string, body: unknown) =>
    fetch(`${server.url}${prefix}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const totals = async (): Promise<Totals> => {
    const response = await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${server.key}` } });
    assert.equal(response.status, 200);
    return (await response.json()).totals as Totals;
  };
  const details = (usage: unknown) => (usage as { completion_tokens_details: Details }).completion_tokens_details;

  test("a malformed prediction is a 400 naming the field exactly, on every alias of the route", async () => {
    const cases: Array<[unknown, string]> = [
      [{ type: "content", content: [{ type: "image_url", image_url: { url: "https://x" } }] }, "prediction.content[0].type"],
      [{ type: "content", content: [{ type: "text" }] }, "prediction.content[0].text"],
      [{ type: "text", content: "x" }, "prediction.type"],
      [{ type: "content" }, "prediction.content"],
      [{ type: "content", content: 42 }, "prediction.content"],
      ["x", "prediction"],
    ];
    for (const prefix of ["/v1/compat", "/v1/openai", "/v1"]) {
      for (const [prediction, param] of cases) {
        const response = await post(prefix, { ...rivers, prediction });
        assert.equal(response.status, 400, `${prefix} ${JSON.stringify(prediction)}`);
        const { error } = await response.json();
        assert.equal(error.type, "invalid_request_error");
        assert.equal(error.param, param, `${prefix} ${JSON.stringify(prediction)}`);
      }
    }
    const viaClient = await client.chat.completions
      .create({ ...rivers, prediction: { type: "content", content: [{ type: "image" }] } } as never)
      .catch((e: unknown) => e);
    assert.ok(viaClient instanceof OpenAI.BadRequestError);
    assert.equal(viaClient.param, "prediction.content[0].type");
  });

  test("a prediction longer than the context allows beside the prompt is a 400 naming it", async () => {
    const error = await client.chat.completions
      .create({ ...rivers, prediction: { type: "content", content: "word ".repeat(9000) } })
      .catch((e: unknown) => e);
    assert.ok(error instanceof OpenAI.BadRequestError);
    assert.equal(error.param, "prediction");
    assert.equal(error.code, "context_length_exceeded");
    assert.match(error.message, /maximum context length is 8192 tokens/);
  });

  test("usage always carries the prediction counts; output, usage, estimated_cost and /v1/usage agree with the prediction as without it", async () => {
    const plain = await client.chat.completions.create(rivers);
    assert.deepEqual(details(plain.usage), { reasoning_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
    const answer = plain.choices[0]!.message.content!;
    assert.ok(answer.length > 0);
    const before = await totals();
    const asParts = [
      { type: "text" as const, text: answer.slice(0, 10) },
      { type: "text" as const, text: answer.slice(10) },
    ];
    const predicted: OpenAI.ChatCompletion[] = [];
    for (const content of [answer, asParts, `${answer.slice(0, 20)} an edit in the middle ${answer.slice(20)}`, ""]) {
      predicted.push(await client.chat.completions.create({ ...rivers, prediction: { type: "content", content } }));
    }
    for (const reply of predicted) {
      // Exact: the prediction changes how fast the answer comes, never what it is.
      assert.equal(reply.choices[0]!.message.content, answer);
      const usage = reply.usage!;
      const { accepted_prediction_tokens: accepted, rejected_prediction_tokens: rejected } = details(usage);
      assert.ok(Number.isInteger(accepted) && Number.isInteger(rejected));
      // Billed completion tokens: the output's (as without the prediction) and the rejected ones.
      assert.equal(usage.completion_tokens, plain.usage!.completion_tokens + rejected);
      assert.ok(accepted <= plain.usage!.completion_tokens);
      assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
      assert.equal((usage as unknown as { estimated_cost: number }).estimated_cost, smolStandardUnits(usage) / 1e8);
    }
    assert.deepEqual(details(predicted[3]!.usage), { reasoning_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
    const after = await totals();
    const sum = (pick: (usage: OpenAI.CompletionUsage) => number) => predicted.reduce((n, reply) => n + pick(reply.usage!), 0);
    assert.equal(after.requests - before.requests, predicted.length);
    assert.equal(
      after.completion_tokens - before.completion_tokens,
      sum((u) => u.completion_tokens),
    );
    assert.equal(
      after.accepted_prediction_tokens - before.accepted_prediction_tokens,
      sum((u) => details(u).accepted_prediction_tokens),
    );
    assert.equal(
      after.rejected_prediction_tokens - before.rejected_prediction_tokens,
      sum((u) => details(u).rejected_prediction_tokens),
    );
    assert.equal(
      Math.round((after.cost_usd - before.cost_usd) * 1e8),
      sum((u) => smolStandardUnits(u)),
    );
  });

  test("a prediction that is the model's own temperature-0 answer is accepted: accepted_prediction_tokens > 0 (needs the engine's speculative decoding)", async () => {
    const plain = await client.chat.completions.create(rivers);
    const answer = plain.choices[0]!.message.content!;
    const reply = await client.chat.completions.create({ ...rivers, prediction: { type: "content", content: answer } });
    assert.equal(reply.choices[0]!.message.content, answer);
    const { accepted_prediction_tokens: accepted, rejected_prediction_tokens: rejected } = details(reply.usage);
    assert.ok(accepted > 0, `accepted ${accepted}, rejected ${rejected}`);
    assert.equal(reply.usage!.completion_tokens, plain.usage!.completion_tokens + rejected);
  });

  test("a stream's usage chunk carries the prediction counts, and its content is the answer", async () => {
    const plain = await client.chat.completions.create(rivers);
    const answer = plain.choices[0]!.message.content!;
    const stream = await client.chat.completions.create({
      ...rivers,
      prediction: { type: "content", content: answer },
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(content, answer);
    assert.ok(usage);
    const { accepted_prediction_tokens: accepted, rejected_prediction_tokens: rejected } = details(usage);
    assert.ok(Number.isInteger(accepted) && Number.isInteger(rejected));
    assert.equal(usage.completion_tokens, plain.usage!.completion_tokens + rejected);
    assert.equal((usage as unknown as { estimated_cost: number }).estimated_cost, smolStandardUnits(usage) / 1e8);
  });

  test("what OpenAI refuses beside a prediction is accepted here: n > 1, logprobs, penalties, tools", async () => {
    const reply = await client.chat.completions.create({
      ...rivers,
      max_tokens: 16,
      prediction: { type: "content", content: TEXT },
      n: 2,
      logprobs: true,
      top_logprobs: 2,
      presence_penalty: 0.5,
      frequency_penalty: 0.5,
      tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } } } } }],
      tool_choice: "none",
    });
    assert.equal(reply.choices.length, 2);
    assert.ok(reply.choices.every((c) => c.logprobs?.content?.length));
    const { rejected_prediction_tokens: rejected } = details(reply.usage);
    assert.ok(reply.usage!.completion_tokens >= rejected);
  });

  test("a Batch API line with a prediction runs like a request, billed at the batch price; a malformed one fails the batch naming it", async () => {
    const line = (customId: string, prediction: unknown) =>
      JSON.stringify({ custom_id: customId, method: "POST", url: "/v1/chat/completions", body: { ...rivers, prediction } });
    const input = await upload(client, [
      line("edit", { type: "content", content: TEXT }),
      line("parts", { type: "content", content: [{ type: "text", text: TEXT }] }),
    ]);
    const created = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const batch = await settled(client, created.id);
    assert.equal(batch.status, "completed", JSON.stringify({ errors: batch.errors, counts: batch.request_counts }));
    const lines = await resultLines(client, batch.output_file_id);
    assert.equal(lines.length, 2);
    for (const result of lines) {
      assert.equal(result.response!.status_code, 200);
      const usage = result.response!.body.usage as OpenAI.CompletionUsage & { estimated_cost: number };
      const { rejected_prediction_tokens: rejected, accepted_prediction_tokens: accepted } = details(usage);
      assert.ok(Number.isInteger(accepted) && Number.isInteger(rejected));
      assert.ok(usage.completion_tokens >= rejected);
      const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
      const cost = requestCost(BATCH_PRICES, {
        promptTokens: usage.prompt_tokens,
        cachedPromptTokens: cached,
        completionTokens: usage.completion_tokens,
      });
      assert.equal(usage.estimated_cost, Number(cost));
    }

    const bad = await upload(client, [line("bad", { type: "content", content: [{ type: "image_url", image_url: { url: "https://x" } }] })]);
    const refused = await client.batches.create({ input_file_id: bad.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    assert.equal(refused.status, "failed");
    assert.equal(refused.errors!.data![0]!.param, "body.prediction.content.0.type");
  });
});
