import assert from "node:assert/strict";
import { test } from "node:test";
import type { Backend } from "../../src/backends/backend.js";
import { fakeBackend } from "../helpers/fake-backend.js";
import type { CatalogEntry } from "../../src/catalog/types.js";
import type { GenerationEvent } from "../../src/protocol/generation.js";
import { createMemoryLimits } from "../../src/limits/in-memory-limits.js";
import { createChatService } from "../../src/serving/chat-service.js";
import type { Caller } from "../../src/serving/types.js";
import { createModelRegistry } from "../../src/serving/model-registry.js";
import type { SpendBudgets, UsageLedger, UsageRecord } from "../../src/billing/ports.js";

/**
 * The request lifecycle around an engine fault that a real model cannot be made to produce on
 * demand: the backend here fails mid-generation. Everything else is the real serving code.
 */
const entry: CatalogEntry = {
  id: "test/faulty",
  source: "file:/dev/null",
  context_length: 1024,
  precision: "q4_0",
  tags: [],
  pricing: { input: "1", output: "2", cached_input: "0.5", tiers: { priority: "1.5", flex: "0.8" } },
  created: 0,
};

function faultyBackend(failAfterTokens: number): Backend {
  return fakeBackend((_prompt, choices) =>
    choices.map(async function* (): AsyncGenerator<GenerationEvent> {
      yield { type: "started", queuedMs: 0, cachedTokens: 0 };
      for (let n = 1; n <= failAfterTokens; n++) yield { type: "text", text: `t${n} `, completionTokens: n };
      throw new Error("llama_decode failed");
    }),
  );
}

function setup(failAfterTokens: number) {
  const rows: UsageRecord[] = [];
  const ledger: UsageLedger = {
    async settled() {},
    async record(row) {
      if (!rows.some((r) => r.requestId === row.requestId)) rows.push(row);
    },
    async markUndelivered(requestId, errorCode) {
      const row = rows.find((r) => r.requestId === requestId && r.status === "completed");
      if (row) Object.assign(row, { status: "failed", errorCode });
    },
  };
  // The ledger's row charges the reservation (billing/ledger.ts): settling it apart would charge twice.
  const budgets: SpendBudgets = {
    async reserve() {
      return { settle: async () => assert.fail("the lifecycle settles a reservation through the ledger row") };
    },
  };
  const registry = createModelRegistry([entry]);
  registry.ready(entry.id, faultyBackend(failAfterTokens));
  const limits = createMemoryLimits({ concurrentPerAccountModel: 1, requestsPerMinute: null, tokensPerMinute: null });
  const chat = createChatService({ registry, ledger, limits, budgets });
  const caller: Caller = {
    accountId: "acct_1",
    keyId: "key_1",
    allowedModels: null,
    limits: { requestsPerMinute: null, tokensPerMinute: null, budgetUsd: "1" },
  };
  return { chat, caller, rows };
}

test("an engine failure mid-stream bills exactly the tokens delivered, once, and frees the slot", async () => {
  const { chat, caller, rows } = setup(3);
  const run = await chat.start(
    caller,
    { model: entry.id, prompt: { kind: "chat", messages: [{ role: "user", content: "hi" }] }, maxTokens: 50, stop: [] },
    new AbortController().signal,
  );
  const texts: string[] = [];
  await assert.rejects(async () => {
    for await (const event of run.events) if (event.type === "text") texts.push(event.text);
  }, /llama_decode failed/);
  assert.equal(texts.length, 3);
  assert.equal(rows.length, 1);
  const [row] = rows;
  assert.equal(row!.status, "failed");
  assert.equal(row!.completionTokens, 3);
  assert.equal(row!.promptTokens, 10);
  // 10 x 1 + 3 x 2 per 1M tokens
  assert.equal(row!.costUsd, "0.000016");
  // The concurrency slot (limit 1) was released: the next request is admitted.
  const next = await chat.start(
    caller,
    { model: entry.id, prompt: { kind: "chat", messages: [{ role: "user", content: "again" }] }, maxTokens: 5, stop: [] },
    new AbortController().signal,
  );
  await assert.rejects(async () => {
    for await (const _ of next.events);
  });
  assert.equal(rows.length, 2);
});

test("a consumer that walks away early is billed for what it was given, once", async () => {
  const { chat, caller, rows } = setup(5);
  const run = await chat.start(
    caller,
    {
      model: entry.id,
      prompt: { kind: "chat", messages: [{ role: "user", content: "hi" }] },
      maxTokens: 50,
      stop: [],
      serviceTier: "priority",
    },
    new AbortController().signal,
  );
  for await (const event of run.events) if (event.type === "text") break;
  assert.equal(rows.length, 1);
  assert.equal(rows[0]!.status, "cancelled");
  assert.equal(rows[0]!.completionTokens, 1);
  assert.equal(rows[0]!.serviceTier, "priority");
  assert.equal(rows[0]!.costUsd, "0.000018"); // (10 x 1 + 1 x 2) x 1.5 per 1M tokens
});

test("a request rejected before generation is recorded at no charge", async () => {
  const { chat, caller, rows } = setup(1);
  await assert.rejects(
    chat.start(
      caller,
      { model: entry.id, prompt: { kind: "chat", messages: [{ role: "user", content: "hi" }] }, maxTokens: 5000, stop: [] },
      new AbortController().signal,
    ),
    {
      code: "context_length_exceeded",
    },
  );
  assert.equal(rows.length, 1);
  assert.equal(rows[0]!.status, "rejected");
  assert.equal(rows[0]!.costUsd, "0");
  assert.equal(rows[0]!.errorCode, "context_length_exceeded");
});
