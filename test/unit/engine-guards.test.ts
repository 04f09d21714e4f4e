import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EmptyPrompt, GenerationStalled } from "../../src/backends/backend.js";
import { fakeBackend } from "../helpers/fake-backend.js";
import type { CatalogEntry } from "../../src/catalog/types.js";
import { StepCostModel } from "../../src/engine/core/cost-model.js";
import { tieredPolicy } from "../../src/engine/core/policy.js";
import { EngineRequest } from "../../src/engine/core/request.js";
import { ShardScheduler, StalledError } from "../../src/engine/core/scheduler.js";
import { EmptyPromptError, nonEmptyPrompt } from "../../src/engine/prompt/empty-prompt.js";
import { nextFairJob } from "../../src/engine/prompt/prompt-pool.js";
import type { GenerationEvent } from "../../src/protocol/generation.js";
import { InvalidRequest, ServiceError } from "../../src/errors.js";
import { step, GREEDY_SAMPLER as SAMPLER } from "../helpers/scheduler-steps.js";
import { createMemoryLimits } from "../../src/limits/in-memory-limits.js";
import { createChatService } from "../../src/serving/chat-service.js";
import type { Caller } from "../../src/serving/types.js";
import { createModelRegistry } from "../../src/serving/model-registry.js";
import type { UsageRecord } from "../../src/billing/ports.js";

// Issue 20's engine guards on their own: the pure parts, and the serving lifecycle around backend
// refusals a real model cannot be made to produce (every pulled model has a BOS token; a stall
// needs a request the engine no longer lets in).

describe("a prompt of no tokens", () => {
  test("is BOS alone where the model has one, refused where it has none, left alone otherwise", () => {
    assert.deepEqual(nonEmptyPrompt([], 1), [1]);
    assert.deepEqual(nonEmptyPrompt([5, 6], 1), [5, 6]);
    assert.throws(() => nonEmptyPrompt([], undefined), EmptyPromptError);
  });
});

const texts = { pieceBytes: () => new Uint8Array([97]), tokenText: () => "a", isEndOfGeneration: () => false };
const request = (promptLength: number) =>
  new EngineRequest(
    { promptTokens: Array.from({ length: promptLength }, () => 1), maxTokens: 1000, sampling: { temperature: 0, topP: 1 }, stop: [] },
    SAMPLER,
  );
// A machine whose steps cost nothing: only the token budget limits a step.
const scheduler = (stepTokens: number, stallTimeoutMs: number) =>
  new ShardScheduler(
    { sequences: 2, cellsPerSequence: 4096, stepTokens, prefixCache: false, stallTimeoutMs },
    tieredPolicy,
    texts,
    new StepCostModel({ prior: [0, 0, 0, 0] }),
  );
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function failure(r: EngineRequest): Promise<unknown> {
  try {
    for await (const event of r.events.drain()) void event;
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("the stall limit", () => {
  test("a running request that can never be scheduled fails, and its sequence is freed", async () => {
    const s = scheduler(64, 20);
    const stuck = request(0); // what an empty prompt was before the guard: nothing to compute, never samples
    s.enqueue(stuck);
    assert.equal(step(s).batchSize, 0);
    assert.equal(s.freeSequences, 1);
    await sleep(30);
    step(s);
    assert.equal(s.freeSequences, 2);
    assert.ok((await failure(stuck)) instanceof StalledError);
  });

  test("a paused request keeps its sequence and skips its steps; resumed, it goes on; paused too long, it fails", async () => {
    const s = scheduler(64, 40);
    const r = request(4);
    s.enqueue(r);
    step(s);
    assert.equal(r.generatedCount, 1);
    s.setPaused(r, true);
    assert.equal(step(s).batchSize, 0);
    assert.equal(r.status, "running");
    s.setPaused(r, false);
    step(s);
    assert.equal(r.generatedCount, 2);
    s.setPaused(r, true);
    assert.equal(step(s).batchSize, 0); // as a shard's loop does: the step after the last one it ran
    await sleep(50);
    step(s);
    assert.equal(r.status, "finished");
    assert.equal(s.freeSequences, 2);
  });

  test("a request waiting its turn behind a full batch is not stalled", async () => {
    const s = scheduler(16, 20);
    const first = request(200);
    const second = request(200);
    s.enqueue(first);
    s.enqueue(second);
    for (let i = 0; i < 5; i++) {
      const plan = step(s);
      assert.equal(plan.batchSize, 16, `the first prompt takes the whole budget (step ${i}: ${plan.scheduled.map((p) => p.count)})`);
      await sleep(30);
    }
    assert.equal(second.computed, 0);
    assert.equal(second.status, "running");
  });
});

describe("prompt jobs take turns by key", () => {
  test("round robin between keys, and no key beyond its share", () => {
    const job = (key: string, n: number) => ({ key, n });
    const queues = new Map([
      ["a", [job("a", 1), job("a", 2)]],
      ["b", [job("b", 1)]],
    ]);
    assert.deepEqual(nextFairJob(queues, new Map(), 1, undefined), job("a", 1));
    assert.deepEqual(nextFairJob(queues, new Map([["a", 1]]), 1, "a"), job("b", 1));
    assert.equal(nextFairJob(queues, new Map([["a", 1]]), 1, "b"), undefined, "a is at its share");
    assert.deepEqual(nextFairJob(queues, new Map(), 1, "b"), job("a", 2));
    assert.equal(queues.size, 0);
  });
});

const entry: CatalogEntry = {
  id: "test/guards",
  source: "file:/dev/null",
  context_length: 1024,
  precision: "q4_0",
  tags: [],
  pricing: { input: "1", output: "2", cached_input: "0.5" },
  created: 0,
};

function serving(generation: () => AsyncGenerator<GenerationEvent>) {
  const backend = fakeBackend((_prompt, choices) => choices.map(generation), { textTokens: 0, promptTokens: 5 });
  const rows: UsageRecord[] = [];
  const registry = createModelRegistry([entry]);
  registry.ready(entry.id, backend);
  const limits = createMemoryLimits({ concurrentPerAccountModel: 1, requestsPerMinute: null, tokensPerMinute: null });
  const chat = createChatService({
    registry,
    ledger: { record: async (row) => void rows.push(row), markUndelivered: async () => {}, settled: async () => {} },
    limits,
    budgets: { reserve: async () => null },
  });
  const caller: Caller = {
    accountId: "acct_1",
    keyId: "key_1",
    allowedModels: null,
    limits: { requestsPerMinute: null, tokensPerMinute: null, budgetUsd: null },
  };
  return { chat, caller, rows };
}

describe("serving around the engine's refusals", () => {
  test("an empty prompt the model cannot repair is a 400 empty_prompt, recorded as rejected at no charge", async () => {
    // biome-ignore lint/correctness/useYield: a backend stream that refuses at its first read
    const { chat, caller, rows } = serving(async function* () {
      throw new EmptyPrompt("The prompt is empty.");
    });
    const started = chat.start(
      caller,
      { model: entry.id, prompt: { kind: "text", texts: [""] }, maxTokens: 1, stop: [] },
      new AbortController().signal,
    );
    await assert.rejects(
      started,
      (error: unknown) => error instanceof InvalidRequest && error.code === "empty_prompt" && error.param === "prompt",
    );
    assert.equal(rows.length, 1);
    assert.deepEqual(
      [rows[0]!.status, rows[0]!.costUsd, rows[0]!.completionTokens, rows[0]!.errorCode],
      ["rejected", "0", 0, "empty_prompt"],
    );
  });

  test("a stalled generation ends with a server_error timeout, billed for what was delivered", async () => {
    const { chat, caller, rows } = serving(async function* () {
      yield { type: "started", queuedMs: 0, cachedTokens: 0 };
      yield { type: "text", text: "a", completionTokens: 1 };
      yield { type: "text", text: "b", completionTokens: 2 };
      throw new GenerationStalled("The generation made no progress for 60 s and was ended.");
    });
    const run = await chat.start(
      caller,
      { model: entry.id, prompt: { kind: "chat", messages: [{ role: "user", content: "hi" }] }, maxTokens: 50, stop: [] },
      new AbortController().signal,
    );
    await assert.rejects(
      async () => {
        for await (const event of run.events) void event;
      },
      (error: unknown) => error instanceof ServiceError && error.type === "server_error" && error.code === "timeout",
    );
    assert.deepEqual([rows[0]!.status, rows[0]!.completionTokens, rows[0]!.errorCode], ["failed", 2, "timeout"]);
  });
});
