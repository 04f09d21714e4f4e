import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { StepCostModel, type StepShape } from "../../src/engine/core/cost-model.js";
import { tieredPolicy } from "../../src/engine/core/policy.js";
import { EngineRequest } from "../../src/engine/core/request.js";
import { ShardScheduler } from "../../src/engine/core/scheduler.js";
import { CEILING_GROWTH, MAX_DRAFT_PER_REQUEST, ShardSpeculation } from "../../src/engine/core/speculation.js";
import type { StepReply } from "../../src/engine/runner/step-protocol.js";
import type { GenerationEvent } from "../../src/protocol/generation.js";
import { GREEDY_SAMPLER as SAMPLER } from "../helpers/scheduler-steps.js";

// A cost model gone wrong (issue 54's probe: one shard read per_sampled_token_ms 160, and a request
// with a 7,276-token prediction ran its steps past the client's timeout): the draft ceiling bounds
// what the drafts of one step may cost, whatever the model says, from the steps' measured times.

const EOS = 0;
const texts = {
  pieceBytes: (token: number) => (token === EOS ? new Uint8Array() : new Uint8Array([token])),
  tokenText: (token: number) => String.fromCharCode(token),
  isEndOfGeneration: (token: number) => token === EOS,
};
const tokensOf = (text: string) => [...text].map((c) => c.charCodeAt(0));

describe("the draft ceiling", () => {
  test("a step with drafts that overran its prediction halves the longest draft; steps on time raise it back", () => {
    const shard = new ShardSpeculation("auto");
    assert.equal(shard.draftCeiling, MAX_DRAFT_PER_REQUEST);
    shard.stepTook(0, 10, 1000);
    assert.equal(shard.draftCeiling, MAX_DRAFT_PER_REQUEST, "a step without drafts says nothing of them");
    shard.stepTook(40, 100, 201);
    assert.equal(shard.draftCeiling, 20, "half the step's drafts, the most any of its drafts held");
    shard.stepTook(20, 100, 500);
    shard.stepTook(10, 100, 500);
    shard.stepTook(5, 100, 500);
    shard.stepTook(2, 100, 500);
    shard.stepTook(1, 100, 500);
    assert.equal(shard.draftCeiling, 1, "never below one token");
    shard.stepTook(1, 100, 200);
    assert.equal(shard.draftCeiling, 1 + CEILING_GROWTH, "twice the prediction is still on time");
    for (let i = 0; i < 100; i++) shard.stepTook(3, 100, 50);
    assert.equal(shard.draftCeiling, MAX_DRAFT_PER_REQUEST);
  });

  test("under a cost model that prices drafts at nothing, a long prediction's steps come back within their pace, and the output is the model's", async () => {
    // The machine: 20 ms a step, 10 ms a decode, 30 ms a draft token (loaded). The model: a decode
    // 160 ms, a draft token free, never relearnt here: every draft looks as if it cost nothing.
    const measuredMs = (shape: StepShape) => 20 + 10 * shape.decodeTokens + 30 * (shape.draftTokens ?? 0);
    const cost = new StepCostModel({ prior: [5, 160, 5, 0, 0] });
    const s = new ShardScheduler(
      { sequences: 2, cellsPerSequence: 4096, stepTokens: 256, prefixCache: false, stallTimeoutMs: 60_000, speculation: "auto" },
      tieredPolicy,
      texts,
      cost,
    );
    const script = tokensOf("the colours are red, orange, yellow, green, blue and violet; ".repeat(7));
    const r = new EngineRequest(
      { promptTokens: tokensOf("list"), maxTokens: script.length, sampling: { temperature: 0, topP: 1 }, stop: [], prediction: script },
      SAMPLER,
    );
    s.enqueue(r);
    const stepsMs: number[] = [];
    for (let steps = 0; r.status !== "finished" && steps < 1000; steps++) {
      const plan = s.schedule();
      const tokens: number[] = [];
      const counts: number[] = [];
      for (const sampled of plan.sampled) {
        const draft = plan.drafts.get(sampled)?.tokens ?? [];
        let accepted = 0;
        for (;;) {
          const token = script[sampled.generatedCount + accepted] ?? EOS;
          tokens.push(token);
          if (accepted >= draft.length || draft[accepted] !== token) break;
          accepted++;
        }
        counts.push(accepted + 1);
      }
      const reply: StepReply = {
        type: "step",
        tokens: Int32Array.from(tokens),
        counts: Uint8Array.from(counts),
        logprobs: tokens.map(() => null),
        failedSamplers: [],
        failedRestores: [],
        setupMs: 0,
        decodeMs: 0,
        sampleMs: 0,
      };
      // What the shard does with a step's measured time (shard.ts `measured`), the cost model left as it is.
      const ms = measuredMs(plan.shape);
      if (plan.shape.draftTokens) s.drafting.stepTook(plan.shape.draftTokens, cost.predict(plan.shape), ms);
      stepsMs.push(ms);
      s.update(plan, reply);
    }
    const events: GenerationEvent[] = [];
    for await (const event of r.events.drain()) events.push(event);
    assert.equal(events.map((e) => (e.type === "text" ? e.text : "")).join(""), String.fromCharCode(...script));
    // The default tier's pace: 300 ms between tokens, a step with a draft at most three of them.
    const pace = 3 * 300;
    assert.ok(stepsMs[1]! > pace, `the first step with a draft overran: ${stepsMs[1]} ms`);
    // The first overrun halves the next draft, and so on until the steps keep to their prediction:
    // two steps past the pace (64 and 32 draft tokens), where every step with a draft took 1,950 ms.
    const late = stepsMs.filter((ms) => ms > pace);
    assert.ok(late.length <= 2, `steps past the pace: ${stepsMs.join(", ")}`);
    assert.ok(stepsMs.length < script.length / 2, `drafts still pay: ${stepsMs.length} steps for ${script.length} tokens`);
  });
});
