import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Backend, GenerationParams, PreparedPrediction } from "../../src/backends/backend.js";
import { fakeBackend } from "../helpers/fake-backend.js";
import { requestBody } from "../../src/backends/upstream/request-body.js";
import { chatPrompt } from "../../src/backends/upstream/prompt.js";
import { streamEvents } from "../../src/backends/upstream/stream-events.js";
import type { InFlightLedger, InFlightStart, SpendBudgets, UsageLedger, UsageRecord } from "../../src/billing/ports.js";
import type { CatalogEntry } from "../../src/catalog/types.js";
import type { GenerationEvent } from "../../src/protocol/generation.js";
import { parseChatRequest, toChatInput } from "../../src/api/chat/input.js";
import { toWireUsage } from "../../src/api/wire-usage.js";
import { createMemoryLimits } from "../../src/limits/in-memory-limits.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { createChatService } from "../../src/serving/chat-service.js";
import { createModelRegistry } from "../../src/serving/model-registry.js";
import type { Caller, ChatInput, Usage } from "../../src/serving/types.js";

/**
 * OpenAI's Predicted Outputs outside the engine: the request's `prediction` checked and named in
 * errors, handed to the backend, and its counts (as the engine reports them, cumulative) turned into
 * usage and a bill. The backend here stands in for an engine that drafts; the rest is the real code.
 */
const base = { model: "test/predict", messages: [{ role: "user", content: "Repeat: a b c" }] };

function paramOf(body: Record<string, unknown>): { param: string | null; code: string | null } {
  try {
    parseChatRequest({ ...base, ...body });
  } catch (error) {
    const { param, code } = error as { param: string | null; code: string | null };
    return { param, code };
  }
  return { param: "accepted", code: null };
}

describe("the prediction parameter", () => {
  test("a malformed prediction is a 400 naming the field exactly", () => {
    const cases: Array<[unknown, string, string]> = [
      ["a b c", "prediction", "invalid_type"],
      [{ type: "text", content: "a" }, "prediction.type", "invalid_value"],
      [{ content: "a" }, "prediction.type", "invalid_value"],
      [{ type: "content" }, "prediction.content", "missing_required_parameter"],
      [{ type: "content", content: 5 }, "prediction.content", "invalid_type"],
      [{ type: "content", content: "a\u0000" }, "prediction.content", "invalid_value"],
      [{ type: "content", content: [{ type: "image_url", image_url: { url: "x" } }] }, "prediction.content[0].type", "invalid_value"],
      [
        { type: "content", content: [{ type: "text", text: "a" }, { type: "text" }] },
        "prediction.content[1].text",
        "missing_required_parameter",
      ],
      [{ type: "content", content: [{ type: "text", text: 1 }] }, "prediction.content[0].text", "invalid_type"],
      [{ type: "content", content: ["a"] }, "prediction.content[0]", "invalid_type"],
    ];
    for (const [prediction, param, code] of cases) assert.deepEqual(paramOf({ prediction }), { param, code }, JSON.stringify(prediction));
  });

  test("text parts join with nothing between them; an empty or absent prediction is none", () => {
    const parts = toChatInput(
      parseChatRequest({
        ...base,
        prediction: {
          type: "content",
          content: [
            { type: "text", text: "a b" },
            { type: "text", text: " c" },
          ],
        },
      }),
    );
    assert.equal(parts.prediction, "a b c");
    assert.equal(toChatInput(parseChatRequest({ ...base, prediction: { type: "content", content: "x" } })).prediction, "x");
    assert.equal(toChatInput(parseChatRequest({ ...base, prediction: { type: "content", content: [] } })).prediction, "");
    assert.equal(toChatInput(parseChatRequest({ ...base, prediction: null })).prediction, undefined);
  });

  test("what OpenAI refuses beside a prediction is accepted: n, tools, logprobs, penalties", () => {
    const body = {
      prediction: { type: "content", content: "a b c" },
      n: 2,
      logprobs: true,
      top_logprobs: 2,
      presence_penalty: 0.5,
      frequency_penalty: 0.5,
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
    };
    assert.deepEqual(paramOf(body), { param: "accepted", code: null });
  });
});

const entry: CatalogEntry = {
  id: "test/predict",
  source: "file:/dev/null",
  context_length: 1024,
  precision: "q4_0",
  tags: [],
  pricing: { input: "1", output: "2", cached_input: "0.5", tiers: { priority: "1.5", flex: "0.8" } },
  created: 0,
};

/** The tokens of a prediction: one a word. */
const words = (text: string) =>
  text
    .split(" ")
    .filter(Boolean)
    .map((_, i) => 100 + i);

interface Script {
  /** Per choice: the engine's events after `started`. */
  events: (choice: number) => GenerationEvent[];
  /** A lower bound of a text's tokens (the cheap check before tokenizing). */
  minimumTextTokens?: (text: string) => number;
}

function predictingBackend(script: Script, seen: { params: GenerationParams[]; prepared: string[] }): Backend {
  const generate: Backend["generate"] = (_prompt, choices) => {
    seen.params.push(...choices);
    return choices.map(async function* (_params, choice): AsyncGenerator<GenerationEvent> {
      yield { type: "started", queuedMs: 0, cachedTokens: 0 };
      yield* script.events(choice);
    });
  };
  return fakeBackend(generate, {
    slots: 4,
    async preparePrediction(text): Promise<PreparedPrediction> {
      seen.prepared.push(text);
      const tokens = words(text);
      return { text, tokens, tokenCount: tokens.length };
    },
    minimumTextTokens: script.minimumTextTokens,
  });
}

function setup(script: Script) {
  const rows: UsageRecord[] = [];
  const seen = { params: [] as GenerationParams[], prepared: [] as string[], covers: [] as number[], starts: [] as InFlightStart[] };
  const ledger: UsageLedger = {
    async record(row) {
      if (!rows.some((r) => r.requestId === row.requestId)) rows.push(row);
    },
    async markUndelivered() {},
    async settled() {},
  };
  const budgets: SpendBudgets = { reserve: async () => ({ settle: async () => {} }) };
  // The durable row's count is written ahead of delivery: each cover asks for the tokens a crash would bill.
  const inFlight: InFlightLedger = {
    async begin(start) {
      seen.starts.push(start);
      return { guard: { cover: (tokens) => void seen.covers.push(tokens), close() {} }, reserved: false };
    },
  };
  const registry = createModelRegistry([entry]);
  registry.ready(entry.id, predictingBackend(script, seen));
  const limits = createMemoryLimits({ concurrentPerAccountModel: 4, requestsPerMinute: null, tokensPerMinute: null });
  const metrics = createMetrics(() => []);
  const chat = createChatService({ registry, ledger, limits, budgets, inFlight, metrics });
  const caller: Caller = {
    accountId: "acct_1",
    keyId: "key_1",
    allowedModels: null,
    limits: { requestsPerMinute: null, tokensPerMinute: null, budgetUsd: "1" },
  };
  return { chat, caller, rows, seen, metrics };
}

const ask = (extra: Partial<ChatInput> = {}): ChatInput => ({
  model: entry.id,
  prompt: { kind: "chat", messages: [{ role: "user", content: "Repeat." }] },
  maxTokens: 50,
  stop: [],
  ...extra,
});

async function usageOf(chat: ReturnType<typeof setup>["chat"], caller: Caller, input: ChatInput): Promise<{ usage: Usage; text: string }> {
  const run = await chat.start(caller, input, new AbortController().signal);
  let text = "";
  for await (const event of run.events) {
    if (event.type === "text") text += event.text;
    if (event.type === "done") return { usage: event.usage, text };
  }
  throw new Error("no done event");
}

/** The prediction "one two three four five six seven eight nine ten" is 10 tokens here. */
const TEN = "one two three four five six seven eight nine ten";

describe("prediction counts in usage and the bill", () => {
  test("rejected prediction tokens are billed as completion tokens: usage, cost and ledger row agree exactly", async () => {
    const { chat, caller, rows, seen } = setup({
      events: () => [
        { type: "text", text: "one two", completionTokens: 2, prediction: { accepted: 2, rejected: 0 } },
        { type: "text", text: " three X Y", completionTokens: 5, prediction: { accepted: 3, rejected: 3 } },
        { type: "text", text: " seven", completionTokens: 6, prediction: { accepted: 4, rejected: 3 } },
        {
          type: "finish",
          reason: "stop",
          completionTokens: 6,
          prediction: { accepted: 4, rejected: 3 },
          speculation: { drafts: 3, draftTokens: 9, acceptedTokens: 5 },
        },
      ],
    });
    const { usage, text } = await usageOf(chat, caller, ask({ prediction: TEN }));
    assert.equal(text, "one two three X Y seven");
    assert.deepEqual(seen.prepared, [TEN]);
    assert.deepEqual(seen.params[0]!.prediction, { text: TEN, tokens: words(TEN), tokenCount: 10 });
    // 6 generated + 3 rejected; (10 × 1 + 9 × 2) per 1M tokens.
    assert.deepEqual(
      { ...usage },
      {
        promptTokens: 10,
        cachedPromptTokens: 0,
        completionTokens: 9,
        reasoningTokens: 0,
        acceptedPredictionTokens: 4,
        rejectedPredictionTokens: 3,
        cost: "0.000028",
      },
    );
    const wire = toWireUsage(usage);
    assert.equal(wire.completion_tokens, 9);
    assert.equal(wire.total_tokens, 19);
    assert.deepEqual(wire.completion_tokens_details, { reasoning_tokens: 0, accepted_prediction_tokens: 4, rejected_prediction_tokens: 3 });
    assert.equal(rows.length, 1);
    const row = rows[0]!;
    assert.deepEqual(
      [row.status, row.completionTokens, row.acceptedPredictionTokens, row.rejectedPredictionTokens, row.costUsd],
      ["completed", 9, 4, 3, usage.cost],
    );
    // The durable count covers the rejected tokens as they accrue; the reservation allows for the whole prediction.
    assert.deepEqual(seen.covers, [2, 8, 9]);
    assert.equal(seen.starts[0]!.maxCompletionTokens, 50 + 10);
  });

  test("each choice drafts from the prediction: counts are summed, and a choice's rejected tokens are billed up to the prediction's length", async () => {
    const { chat, caller, rows } = setup({
      events: (choice) => [
        { type: "text", text: "one", completionTokens: 4, prediction: { accepted: 2, rejected: choice === 0 ? 1 : 25 } },
        { type: "finish", reason: "stop", completionTokens: 4, prediction: { accepted: 2, rejected: choice === 0 ? 1 : 25 } },
      ],
    });
    const { usage } = await usageOf(chat, caller, ask({ prediction: TEN, n: 2 }));
    assert.equal(usage.acceptedPredictionTokens, 4);
    assert.equal(usage.rejectedPredictionTokens, 1 + 10);
    assert.equal(usage.completionTokens, 8 + 11);
    assert.equal(usage.cost, "0.000048"); // (10 × 1 + 19 × 2) per 1M tokens
    assert.equal(rows[0]!.costUsd, usage.cost);
    assert.equal(rows[0]!.completionTokens, 19);
  });

  test("a request cut short is billed for the rejected tokens reported so far", async () => {
    const { chat, caller, rows } = setup({
      events: () => [
        { type: "text", text: "one", completionTokens: 2, prediction: { accepted: 1, rejected: 2 } },
        { type: "text", text: " two", completionTokens: 3, prediction: { accepted: 2, rejected: 2 } },
      ],
    });
    const run = await chat.start(caller, ask({ prediction: TEN }), new AbortController().signal);
    for await (const event of run.events) if (event.type === "text" && event.text === " two") break;
    assert.deepEqual([rows[0]!.status, rows[0]!.completionTokens, rows[0]!.rejectedPredictionTokens], ["cancelled", 5, 2]);
    assert.equal(rows[0]!.costUsd, "0.00002"); // (10 × 1 + 5 × 2) per 1M tokens
  });

  test("without a prediction (or with an empty one) the counts are 0 and nothing is prepared", async () => {
    const { chat, caller, seen } = setup({ events: () => [{ type: "finish", reason: "stop", completionTokens: 3 }] });
    for (const prediction of [undefined, ""]) {
      const { usage } = await usageOf(chat, caller, ask(prediction === undefined ? {} : { prediction }));
      assert.deepEqual([usage.completionTokens, usage.acceptedPredictionTokens, usage.rejectedPredictionTokens], [3, 0, 0]);
    }
    assert.deepEqual(seen.prepared, []);
    assert.ok(seen.params.every((p) => p.prediction === undefined));
    assert.equal(seen.starts[0]!.maxCompletionTokens, 50);
  });

  test("a prediction longer than the context allows beside the prompt is a 400 naming it, recorded at no charge", async () => {
    const { chat, caller, rows, seen } = setup({ events: () => [{ type: "finish", reason: "stop", completionTokens: 1 }] });
    const fits = Array.from({ length: 1014 }, () => "w").join(" "); // 1,024 − 10 prompt tokens
    await usageOf(chat, caller, ask({ prediction: fits, maxTokens: 5 }));
    const tooLong = `${fits} w`;
    await assert.rejects(chat.start(caller, ask({ prediction: tooLong, maxTokens: 5 }), new AbortController().signal), {
      status: 400,
      param: "prediction",
      code: "context_length_exceeded",
    });
    assert.deepEqual([rows[1]!.status, rows[1]!.costUsd, rows[1]!.errorCode], ["rejected", "0", "context_length_exceeded"]);
    assert.equal(seen.prepared.length, 2);
  });

  test("a prediction whose lower bound cannot fit is refused before it is tokenized", async () => {
    const { chat, caller, seen } = setup({ events: () => [], minimumTextTokens: (text) => text.length });
    await assert.rejects(
      chat.start(caller, ask({ prediction: "x".repeat(2000) }), new AbortController().signal),
      (error: Error & { param?: string; message: string }) => {
        assert.equal(error.param, "prediction");
        assert.match(error.message, /the prediction is at least 2000 tokens/);
        return true;
      },
    );
    assert.deepEqual(seen.prepared, []);
  });

  test("/metrics counts drafts, draft tokens and accepted tokens per model and tier, from each choice's finish", async () => {
    const { chat, caller, metrics } = setup({
      events: () => [
        { type: "finish", reason: "stop", completionTokens: 4, speculation: { drafts: 2, draftTokens: 7, acceptedTokens: 3 } },
      ],
    });
    await usageOf(chat, caller, ask({ n: 2 }));
    await usageOf(chat, caller, ask({ serviceTier: "priority" }));
    const text = await metrics.render();
    assert.match(text, /^vllm:spec_decode_num_drafts_total\{model_name="test\/predict",tier="default"\} 4$/m);
    assert.match(text, /^vllm:spec_decode_num_draft_tokens_total\{model_name="test\/predict",tier="default"\} 14$/m);
    assert.match(text, /^vllm:spec_decode_num_accepted_tokens_total\{model_name="test\/predict",tier="default"\} 6$/m);
    assert.match(text, /^vllm:spec_decode_num_accepted_tokens_total\{model_name="test\/predict",tier="priority"\} 3$/m);
    // Generated tokens count what was output, never the drafts.
    assert.match(text, /^vllm:generation_tokens_total\{model_name="test\/predict",tier="default"\} 8$/m);
  });
});

describe("an upstream engine and predictions", () => {
  const never = new AbortController().signal;

  test("the prediction goes up as OpenAI's parameter; an upper bound of its tokens cannot refuse it", () => {
    const prompt = chatPrompt([{ role: "user", content: "hi" }], [], {});
    const params: GenerationParams = {
      maxTokens: 5,
      sampling: { temperature: 0, topP: 1 },
      stop: [],
      prediction: { text: "a b", tokenCount: 3, tokenCountIsUpperBound: true },
    };
    assert.deepEqual(requestBody(prompt, params, { model: "m", sendPriority: false }).prediction, { type: "content", content: "a b" });
    assert.equal(requestBody(prompt, { ...params, prediction: undefined }, { model: "m", sendPriority: false }).prediction, undefined);
  });

  test("its usage's prediction counts are read, and its completion_tokens (which holds the rejected ones) counts the output alone", async () => {
    const sse = [
      { choices: [{ delta: { content: "Hi" }, finish_reason: "stop" }] },
      {
        choices: [],
        usage: {
          prompt_tokens: 12,
          completion_tokens: 9,
          completion_tokens_details: { reasoning_tokens: 0, accepted_prediction_tokens: 4, rejected_prediction_tokens: 3 },
        },
      },
    ]
      .map((c) => `data: ${JSON.stringify(c)}\n\n`)
      .join("");
    const body = (async function* () {
      yield new TextEncoder().encode(`${sse}data: [DONE]\n\n`);
    })();
    const events: GenerationEvent[] = [];
    for await (const e of streamEvents(body, never)) events.push(e);
    assert.deepEqual(events.at(-1), {
      type: "finish",
      reason: "stop",
      completionTokens: 6,
      promptTokens: 12,
      cachedTokens: 0,
      prediction: { accepted: 4, rejected: 3 },
    });
  });
});
