import assert from "node:assert/strict";
import { test } from "node:test";
import { StepCostModel } from "../../src/engine/core/cost-model.js";
import { tieredPolicy } from "../../src/engine/core/policy.js";
import { EngineRequest } from "../../src/engine/core/request.js";
import { ShardScheduler } from "../../src/engine/core/scheduler.js";
import { Shard } from "../../src/engine/core/shard.js";
import { ShardGroup } from "../../src/engine/core/shard-group.js";
import type { ShardRunner } from "../../src/engine/runner/shard-runner.js";
import type { StepMessage, StepReply } from "../../src/engine/runner/step-protocol.js";
import type { ServiceTier } from "../../src/protocol/tiers.js";
import { GREEDY_SAMPLER as SAMPLER } from "../helpers/scheduler-steps.js";

// Two shards of a model sharing two cores, their step loops real, the runner's part played by a
// thread that takes 5 ms a step and records when it ran and on how many threads (the decode itself
// is the real runner's business, tested against the model elsewhere).
const texts = {
  pieceBytes: (token: number) => (token === 0 ? new Uint8Array() : new Uint8Array([96 + token])),
  tokenText: (token: number) => String.fromCharCode(96 + token),
  isEndOfGeneration: (token: number) => token === 0,
};
const request = (promptLength: number, tier: ServiceTier, maxTokens: number) =>
  new EngineRequest(
    {
      promptTokens: Array.from({ length: promptLength }, (_, i) => 1 + (i % 20)),
      maxTokens,
      sampling: { temperature: 0, topP: 1 },
      stop: [],
      tier,
    },
    SAMPLER,
  );

/**
 * Resolves once `done()` holds, looking every 2 ms: the state is waited for, never a set time, so
 * a loaded machine only makes it slower. Fails with `what` if it has not come in 30 s.
 */
async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + 30_000;
  while (!done()) {
    if (performance.now() > deadline) assert.fail(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

interface Ran {
  shard: number;
  threads: number;
  tokens: number;
  from: number;
  to: number;
}

function recordingRunner(shard: number, log: Ran[]): ShardRunner {
  return {
    async step(message: StepMessage): Promise<StepReply> {
      const from = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 5));
      log.push({ shard, threads: message.threads, tokens: message.tokens.length, from, to: performance.now() });
      return {
        type: "step",
        tokens: new Int32Array(message.samples.length).fill(1),
        logprobs: message.samples.map(() => null),
        failedSamplers: [],
        failedRestores: [],
        setupMs: 0,
        decodeMs: 5,
        sampleMs: 0,
      };
    },
    async dropAdapter() {},
    async close() {},
  };
}

test("a shard loading a priority prompt runs it on every core while a shard with only lower tiers holds", async () => {
  const log: Ran[] = [];
  const group = new ShardGroup(2);
  const schedulers = [0, 1].map(
    (i) =>
      new ShardScheduler(
        { shard: i, sequences: 4, cellsPerSequence: 4096, stepTokens: 256, prefixCache: true },
        tieredPolicy,
        texts,
        new StepCostModel(),
      ),
  );
  group.shards = schedulers.map((s, i) => new Shard(s, recordingRunner(i, log), group));
  const [lower, rushing] = group.shards as [Shard, Shard];
  const standards = [request(8, "default", 400), request(8, "flex", 400)];
  for (const r of standards) lower.scheduler.enqueue(r);
  lower.wake();
  // Both shards busy: steps split the cores (waited for, not slept on: a loaded machine may take
  // any time to run the first steps).
  const busy = request(8, "default", 400);
  rushing.scheduler.enqueue(busy);
  rushing.wake();
  await until(() => log.some((r) => r.shard === 0 && r.threads === 1), "with both shards busy, a step has one of the two cores");
  const priority = request(120, "priority", 4);
  rushing.scheduler.enqueue(priority);
  rushing.wake();
  await until(() => priority.generatedCount > 0, "the priority request's first token");
  assert.ok(group.priorityNearby(), "priority was about a moment ago");
  const prefill = log.find((r) => r.shard === 1 && r.tokens >= 100)!;
  assert.ok(prefill, "the priority prompt loads in one step");
  assert.equal(prefill.threads, 2, "on both cores");
  const overlapping = log.filter((r) => r.shard === 0 && r.from < prefill.to && r.to > prefill.from);
  assert.deepEqual(overlapping, [], "the other shard held while it ran");
  const before = log.filter((r) => r.shard === 0).length;
  await until(() => log.filter((r) => r.shard === 0).length > before, "and stepped again once the prompt had loaded");
  await Promise.all(group.shards.map((s) => s.close()));
});
