import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { tieredPolicy } from "../../src/engine/core/policy.js";
import { EngineRequest } from "../../src/engine/core/request.js";
import { StepCostModel } from "../../src/engine/core/cost-model.js";
import { ShardScheduler } from "../../src/engine/core/scheduler.js";
import type { StepPlan } from "../../src/engine/core/step-plan.js";
import { AHEAD_TOKEN, type StepReply } from "../../src/engine/runner/step-protocol.js";
import { step, GREEDY_SAMPLER } from "../helpers/scheduler-steps.js";
import type { GenerationRequest } from "../../src/engine/types.js";
import type { GenerationEvent } from "../../src/protocol/generation.js";

// Steps planned before the reply of the step in flight (core/ahead.ts), with the runner's part
// played by hand: every sample draws token 1 ("a") unless a test says otherwise; 0 ends a generation.
const EOS = 0;
const texts = {
  pieceBytes: (token: number) => (token === EOS ? new Uint8Array() : new Uint8Array([96 + token])),
  tokenText: (token: number) => String.fromCharCode(96 + token),
  isEndOfGeneration: (token: number) => token === EOS,
};

function request(extra: Partial<GenerationRequest> = {}): EngineRequest {
  const promptTokens = Array.from({ length: 12 }, (_, i) => 1 + (i % 20));
  return new EngineRequest(
    { promptTokens, maxTokens: 1000, sampling: { temperature: 0, topP: 1 }, stop: [], cacheNamespace: "tenant", ...extra },
    GREEDY_SAMPLER,
  );
}

function scheduler(sequences = 4, speculation: "auto" | "off" = "off") {
  return new ShardScheduler(
    { sequences, cellsPerSequence: 4096, stepTokens: 256, prefixCache: true, stallTimeoutMs: 60_000, speculation },
    tieredPolicy,
    texts,
    new StepCostModel({ prior: [0, 0, 0, 0] }),
  );
}

/** The runner's reply to `plan`: every sample draws `token`. */
function reply(plan: StepPlan, token = 1): StepReply {
  const tokens = Int32Array.from(plan.sampled.map(() => token));
  return {
    type: "step",
    tokens,
    logprobs: plan.sampled.map(() => null),
    failedSamplers: [],
    failedRestores: [],
    setupMs: 0,
    decodeMs: 0,
    sampleMs: 0,
  };
}

async function events(r: EngineRequest): Promise<GenerationEvent[]> {
  const out: GenerationEvent[] = [];
  for await (const event of r.events.drain()) out.push(event);
  return out;
}

/** A scheduler with `a` decoding (its prompt computed, its first token drawn). */
function decoding(extra: Partial<GenerationRequest> = {}) {
  const s = scheduler();
  const a = request(extra);
  s.enqueue(a);
  step(s);
  assert.equal(a.generatedCount, 1);
  return { s, a };
}

describe("steps planned ahead of the reply in flight", () => {
  test("a lone decode: the step ahead decodes the token being drawn, at the position after it, and both replies land in order", () => {
    const { s, a } = decoding();
    const inFlight = s.schedule();
    const ahead = s.planAhead(inFlight)!;
    assert.ok(ahead, "nothing else could change the next step");
    const message = ahead.message(2);
    assert.deepEqual([...message.tokens], [AHEAD_TOKEN], "the runner puts the token it drew in its place");
    assert.deepEqual([...message.positions], [a.tokens.length], "one position past the token in flight");
    assert.equal(message.samples[0]!.sampler, a.id);
    s.update(inFlight, reply(inFlight, 2));
    s.update(ahead, reply(ahead, 3));
    assert.deepEqual(a.tokens.slice(-3), [1, 2, 3]);
    assert.equal(a.computed, a.tokens.length - 1, "every token but the last drawn has its cell");
    assert.equal(a.ahead, 0);
  });

  test("nothing is planned ahead while a request waits, may draft, could end on its limit, or is paused", () => {
    const { s } = decoding();
    s.enqueue(request());
    assert.equal(s.planAhead(s.schedule()), undefined, "the waiting request is admitted at the next step, not after it");

    const short = decoding({ maxTokens: 2 });
    assert.equal(short.s.planAhead(short.s.schedule()), undefined, "the token drawn now is its last");

    const repeating = scheduler(4, "auto");
    const quoting = request({ promptTokens: [5, 6, 7, 8, 9, 5, 6, 7, 8] });
    repeating.enqueue(quoting);
    step(repeating, 9);
    assert.equal(repeating.planAhead(repeating.schedule()), undefined, "its drafter may draft after the token drawn now");

    const paused = decoding();
    const plan = paused.s.schedule();
    paused.s.setPaused(paused.a, true);
    assert.equal(paused.s.planAhead(plan), undefined, "a paused caller sits out the next step");
  });

  test("a request that ends on the token drawn now: the step ahead's output is dropped and its extra cell removed", async () => {
    const { s, a } = decoding();
    const inFlight = s.schedule();
    const ahead = s.planAhead(inFlight)!;
    s.update(inFlight, reply(inFlight, EOS));
    assert.equal(a.status, "finished");
    const [computed, generated] = [a.computed, a.generatedCount];
    s.update(ahead, reply(ahead, 5));
    assert.equal(a.generatedCount, generated, "nothing drawn after the end");
    const next = s.schedule();
    assert.ok(
      next.ops.some((op) => op.op === "rm" && op.from === computed),
      "the cell the step ahead wrote goes before the sequence is used again",
    );
    assert.ok(next.freeSamplers.includes(a.id));
    const all = await events(a);
    assert.equal(all.filter((e) => e.type === "finish").length, 1);
  });

  test("the next request on the same prompt finds it cached whole after a run of steps ahead", () => {
    const { s, a } = decoding({ maxTokens: 6 });
    for (let inFlight = s.schedule(); a.status === "running";) {
      const ahead = s.planAhead(inFlight);
      s.update(inFlight, reply(inFlight));
      if (ahead) inFlight = ahead;
      else {
        if (a.status === "running") inFlight = s.schedule();
      }
    }
    assert.equal(a.generatedCount, 6);
    const again = new EngineRequest({ ...a.spec }, GREEDY_SAMPLER);
    s.enqueue(again);
    const plan = s.schedule();
    assert.equal(again.computed, again.promptLength - 1, "the prompt's cells are reused but for its last token");
    assert.ok(plan.ops.every((op) => op.op !== "rm" || op.from >= again.computed));
  });
});
