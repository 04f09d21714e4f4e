import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { StepCostModel, type StepShape } from "../../src/engine/core/cost-model.js";
import { chooseShard } from "../../src/engine/core/placement.js";
import { STANDARD_AGING_ADMISSIONS, standardReserve, tieredPolicy } from "../../src/engine/core/policy.js";
import { EngineRequest } from "../../src/engine/core/request.js";
import { ShardScheduler, type ShardSchedulerOptions } from "../../src/engine/core/scheduler.js";
import { DEFAULT_TARGETS } from "../../src/engine/core/step-budget.js";
import type { StepPlan } from "../../src/engine/core/step-plan.js";
import type { GenerationRequest } from "../../src/engine/types.js";
import type { ServiceTier } from "../../src/protocol/tiers.js";
import { step, GREEDY_SAMPLER as SAMPLER } from "../helpers/scheduler-steps.js";

// The time budget, the cost model and priority isolation, pinned by step composition: each test
// gives the scheduler a cost model with known coefficients (no observations: its prior), so every
// step's planned time is exact. The runner's part is played by hand (every sample draws token 1).
const texts = {
  pieceBytes: (token: number) => (token === 0 ? new Uint8Array() : new Uint8Array([96 + token])),
  tokenText: (token: number) => String.fromCharCode(96 + token),
  isEndOfGeneration: (token: number) => token === 0,
};

function request(promptLength: number, tier: ServiceTier = "default", extra: Partial<GenerationRequest> = {}): EngineRequest {
  const promptTokens = Array.from({ length: promptLength }, (_, i) => 1 + (i % 20));
  return new EngineRequest({ promptTokens, maxTokens: 1000, sampling: { temperature: 0, topP: 1 }, stop: [], tier, ...extra }, SAMPLER);
}

/** ms = fixed + decode·decodeTokens + prompt·promptTokens + attended·(cells attended / 1024). */
const machine = (fixed: number, decode: number, prompt: number, attended = 0) =>
  new StepCostModel({ prior: [fixed, decode, prompt, attended] });

function scheduler(sequences: number, cost: StepCostModel, options: Partial<ShardSchedulerOptions> = {}) {
  return new ShardScheduler(
    { sequences, cellsPerSequence: 8192, stepTokens: 256, prefixCache: true, ...options },
    tieredPolicy,
    texts,
    cost,
  );
}

const tokensOf = (plan: StepPlan, r: EngineRequest) => plan.scheduled.find((s) => s.request === r)?.count ?? 0;

/** Runs steps until every request listed generated a token. */
function untilAllSampled(s: ShardScheduler, requests: EngineRequest[], most = 50): void {
  for (let i = 0; i < most && requests.some((r) => r.generatedCount === 0); i++) step(s);
}

describe("the step cost model", () => {
  test("learns a machine's coefficients from measured steps", () => {
    const truth = (shape: StepShape) => 4 + 2 * shape.decodeTokens + 0.8 * shape.promptTokens + 0.3 * (shape.attended / 1024);
    const model = new StepCostModel();
    for (let i = 0; i < 200; i++) {
      const shape = { decodeTokens: 1 + (i % 8), promptTokens: (i * 37) % 200, attended: ((i * 7919) % 50) * 1024 };
      model.observe(shape, truth(shape));
    }
    const probe = { decodeTokens: 6, promptTokens: 100, attended: 40 * 1024 };
    assert.ok(Math.abs(model.predict(probe) - truth(probe)) < 0.5, `predicted ${model.predict(probe)} for ${truth(probe)} ms`);
  });

  test("prices draft tokens apart from a stream's own decode token", () => {
    // A CPU's one-token step is a pass over the weights (40 ms); each draft token riding on it costs compute (15 ms).
    const truth = (shape: StepShape) => 10 + 30 * shape.decodeTokens + 15 * (shape.draftTokens ?? 0) + 0.5 * (shape.attended / 1024);
    const model = new StepCostModel();
    for (let i = 0; i < 300; i++) {
      const draftTokens = i % 3 === 0 ? 0 : (i * 13) % 40;
      const shape = { decodeTokens: 1, promptTokens: 0, attended: (400 + i + draftTokens) * (draftTokens + 1), draftTokens };
      model.observe(shape, truth(shape));
    }
    const long = { decodeTokens: 1, promptTokens: 0, attended: 500 * 65, draftTokens: 64 };
    assert.ok(Math.abs(model.predict(long) - truth(long)) < 0.05 * truth(long), `predicted ${model.predict(long)} for ${truth(long)} ms`);
  });

  test("a lone stream's steps (always one decode token) do not let the fit drift where they cannot tell coefficients apart", () => {
    // Fixed cost and per-decode cost always come together here; noisy times (±20%), drafts now and then.
    const truth = (shape: StepShape) => 10 + 35 * shape.decodeTokens + 15 * (shape.draftTokens ?? 0) + 0.5 * (shape.attended / 1024);
    const model = new StepCostModel();
    let seed = 7;
    const noise = () => ((seed = (seed * 48271) % 2147483647) / 2147483647 - 0.5) * 0.4;
    for (let i = 0; i < 3000; i++) {
      const draftTokens = i % 4 === 0 ? (i * 13) % 40 : 0;
      const shape = { decodeTokens: 1, promptTokens: 0, attended: (500 + (i % 300)) * (draftTokens + 1), draftTokens };
      model.observe(shape, truth(shape) * (1 + noise()));
      const one = { decodeTokens: 1, promptTokens: 0, attended: 600 };
      if (i >= 50)
        assert.ok(
          Math.abs(model.predict(one) - truth(one)) < 0.25 * truth(one),
          `step ${i}: predicted ${model.predict(one)} ms for ${truth(one)}`,
        );
    }
    assert.ok(
      model.coefficients.every((c) => c > -1),
      `coefficients ${model.coefficients.join(", ")}`,
    );
  });

  test("follows a machine that gets slower", () => {
    const model = new StepCostModel();
    const shapes = Array.from({ length: 100 }, (_, i) => ({ decodeTokens: 1 + (i % 8), promptTokens: (i * 37) % 200, attended: 0 }));
    for (const shape of shapes) model.observe(shape, 2 + 1 * shape.decodeTokens + 0.5 * shape.promptTokens);
    for (const shape of shapes) model.observe(shape, 2 * (2 + 1 * shape.decodeTokens + 0.5 * shape.promptTokens));
    const probe = { decodeTokens: 4, promptTokens: 64, attended: 0 };
    assert.ok(Math.abs(model.predict(probe) - 2 * (2 + 4 + 32)) < 2, `predicted ${model.predict(probe)} ms after the slowdown`);
  });
});

describe("the step budget", () => {
  test("the scheduler sizes prompt chunks from the cost model: the step's planned time fits the decoders' target", () => {
    const chunkFor = (cost: StepCostModel) => {
      const s = scheduler(8, cost, { targets: { ...DEFAULT_TARGETS, default: { ttftMs: 100_000, itlMs: 100 } } });
      const streams = Array.from({ length: 4 }, () => request(4));
      for (const r of streams) s.enqueue(r);
      untilAllSampled(s, streams);
      const prompt = request(2000);
      s.enqueue(prompt);
      const plan = step(s);
      assert.equal(
        streams.every((r) => tokensOf(plan, r) === 1),
        true,
        "every stream decodes",
      );
      assert.ok(cost.predict(plan.shape) <= 100);
      assert.equal(s.budget.ms, 100);
      return tokensOf(plan, prompt);
    };
    // 10 + 5·4 decodes + 1 ms a prompt token ≤ 100 ms: 70 tokens; on a machine twice as slow, 35.
    assert.equal(chunkFor(machine(10, 5, 1)), 70);
    assert.equal(chunkFor(machine(10, 5, 2)), 35);
  });

  test("nobody decoding: a prompt takes the whole token budget", () => {
    const s = scheduler(4, machine(10, 5, 1));
    const prompt = request(2000);
    s.enqueue(prompt);
    const plan = step(s);
    assert.equal(tokensOf(plan, prompt), 256);
    assert.equal(s.budget.ms, null);
  });

  test("a priority stream on a shard where a 4,000-token prompt loads gets a token in every step, each planned within its target", () => {
    const cost = machine(8, 6, 1.5, 0.05);
    const s = scheduler(4, cost);
    const priority = request(8, "priority");
    s.enqueue(priority);
    untilAllSampled(s, [priority]);
    const standards = [request(4), request(4)];
    for (const r of standards) s.enqueue(r);
    untilAllSampled(s, standards);
    const prompt = request(4000);
    s.enqueue(prompt);
    let steps = 0;
    while (prompt.generatedCount === 0) {
      const before = priority.generatedCount;
      const plan = step(s);
      steps++;
      assert.equal(priority.generatedCount, before + 1, `step ${steps}: priority sampled`);
      const planned = cost.predict(plan.shape);
      assert.ok(planned <= DEFAULT_TARGETS.priority.itlMs, `step ${steps} planned at ${planned} ms`);
      assert.ok(tokensOf(plan, prompt) > 0, `step ${steps}: the prompt made progress`);
      assert.ok(steps < 400, "the prompt loads in a bounded number of steps");
    }
    assert.ok(
      standards.every((r) => r.generatedCount >= steps / 4),
      "standard streams kept going beside it",
    );
  });

  test("lower tiers' work fills only the slack beside a priority stream, by turns, each within its own tier's target", () => {
    const targets = {
      priority: { ttftMs: 1000, itlMs: 20 },
      default: { ttftMs: 5000, itlMs: 60 },
      flex: { ttftMs: 5000, itlMs: 60 },
      batch: { ttftMs: 5000, itlMs: 60 },
    };
    const cost = machine(4, 4, 1);
    const s = scheduler(7, cost, { targets });
    const standards = Array.from({ length: 6 }, () => request(4));
    for (const r of standards) s.enqueue(r);
    untilAllSampled(s, standards);
    const priority = request(4, "priority");
    s.enqueue(priority);
    untilAllSampled(s, [priority]);
    const waitedMs = new Map(standards.map((r) => [r, 0]));
    const longestWaitMs = new Map(standards.map((r) => [r, 0]));
    let slackOnly = 0;
    for (let i = 0; i < 30; i++) {
      const before = standards.map((r) => r.generatedCount);
      const priorityBefore = priority.generatedCount;
      const plan = step(s);
      const planned = cost.predict(plan.shape);
      assert.equal(priority.generatedCount, priorityBefore + 1, `step ${i}: priority sampled`);
      // Priority alone takes 8 ms (4 + 4); a quarter more leaves no whole token, so one standard token a step (12 ms).
      if (planned <= 12) slackOnly++;
      standards.forEach((r, k) => {
        waitedMs.set(r, r.generatedCount > before[k]! ? 0 : waitedMs.get(r)! + planned);
        longestWaitMs.set(r, Math.max(longestWaitMs.get(r)!, waitedMs.get(r)!));
      });
    }
    assert.ok(slackOnly >= 20, `${slackOnly} of 30 steps carried priority and one lower-tier token`);
    for (const r of standards)
      assert.ok(longestWaitMs.get(r)! < targets.default.itlMs, `a standard stream waited ${longestWaitMs.get(r)} ms between tokens`);
    assert.ok(
      standards.every((r) => r.generatedCount >= 4),
      "every standard stream kept going",
    );
  });

  test("a prompt keeps a minimum chunk when the decoders alone fill the budget", () => {
    const s = scheduler(4, machine(290, 10, 1), { minChunk: 8 });
    const stream = request(4);
    s.enqueue(stream);
    untilAllSampled(s, [stream]);
    // A flex prompt has no pace of its own beside a standard stream: only the minimum chunk.
    const prompt = request(500, "flex");
    s.enqueue(prompt);
    assert.equal(tokensOf(step(s), prompt), 8);
  });

  test("a prompt keeps the pace of its tier's TTFT target among its own tier's streams, but not past a higher tier's", () => {
    const targets = { ...DEFAULT_TARGETS, default: { ttftMs: 1000, itlMs: 100 } };
    const chunk = (decoder: ServiceTier) => {
      // 40 + 10·decodes leaves the prompt 10 ms: 10 tokens at 1 ms each.
      const s = scheduler(4, machine(40, 50, 1), { targets: { ...targets, priority: { ttftMs: 1000, itlMs: 100 } } });
      const stream = request(4, decoder);
      s.enqueue(stream);
      untilAllSampled(s, [stream]);
      const prompt = request(600);
      s.enqueue(prompt);
      return tokensOf(step(s), prompt);
    };
    assert.equal(chunk("default"), 60, "ceil(600 × 100 / 1000): the prompt loads in about its TTFT target");
    assert.equal(chunk("priority"), 10, "a priority stream's target wins over a standard prompt's pace");
  });

  test("with no priority stream decoding, a priority prompt loads whole in one step, ahead of other prompts", () => {
    // 10 + 5·4 decodes + 2 ms a prompt token: within standard's 300 ms, a chunk of 135 tokens.
    const s = scheduler(8, machine(10, 5, 2));
    const streams = Array.from({ length: 4 }, () => request(4));
    for (const r of streams) s.enqueue(r);
    untilAllSampled(s, streams);
    const standardPrompt = request(500);
    const priority = request(200, "priority");
    s.enqueue(standardPrompt);
    s.enqueue(priority);
    const plan = step(s);
    assert.equal(tokensOf(plan, priority), 200, "the whole priority prompt, past the standard streams' budget");
    assert.equal(priority.generatedCount, 1, "its first token in the same step");
    assert.equal(tokensOf(plan, standardPrompt), 0, "the standard prompt waits a step");
    assert.ok(
      streams.every((r) => tokensOf(plan, r) === 1),
      "the streams keep decoding",
    );
  });

  test("a priority request on one of the model's shards a moment ago keeps every step within priority's target", () => {
    const chunk = (priorityNearby: boolean) => {
      const s = scheduler(8, machine(10, 5, 1));
      const streams = Array.from({ length: 4 }, () => request(4));
      for (const r of streams) s.enqueue(r);
      untilAllSampled(s, streams);
      const prompt = request(2000);
      s.enqueue(prompt);
      const plan = step(s, 1, priorityNearby);
      return { tokens: tokensOf(plan, prompt), budget: s.budget.ms };
    };
    assert.deepEqual(chunk(false), { tokens: 252, budget: 300 }, "standard's 300 ms: the rest of the step's 256 tokens");
    // 10 + 5·4 + 1 ms a token within 50 ms: 20 tokens, so a priority request arriving waits for a short step.
    assert.deepEqual(chunk(true), { tokens: 20, budget: 50 });
    const s = scheduler(2, machine(10, 5, 1));
    assert.equal(s.lastPriorityAt, -Infinity);
    s.enqueue(request(4, "priority"));
    step(s);
    assert.ok(performance.now() - s.lastPriorityAt < 1000, "the scheduler notes when priority was last about");
  });

  test("priority's own load past the shard's sequences is reported as saturation, a lower tier it can preempt is not", () => {
    const s = scheduler(2, machine(10, 5, 1));
    const first = [request(4, "priority"), request(4)];
    for (const r of first) s.enqueue(r);
    untilAllSampled(s, first);
    const waiting = request(4, "priority");
    s.enqueue(waiting);
    assert.equal(s.stats().prioritySaturated, false, "a standard stream is there to preempt");
    step(s);
    assert.equal(waiting.generatedCount, 1, "and was preempted for it");
    s.enqueue(request(4, "priority"));
    step(s);
    assert.equal(s.stats().prioritySaturated, true, "two priority streams hold both sequences while a third waits");
  });

  test("per-request chunk cap: the first prompt in line does not take the whole step", () => {
    const s = scheduler(4, machine(0, 0, 0), { chunkCap: 64 });
    const long = request(4000);
    const short = request(20);
    const other = request(300);
    for (const r of [long, short, other]) s.enqueue(r);
    const plan = step(s);
    assert.equal(tokensOf(plan, short), 20, "a short prompt behind a long one loads in the first step");
    assert.equal(tokensOf(plan, other), 64, "another long one gets its capped share");
    assert.equal(tokensOf(plan, long), 256 - 20 - 64, "what is left goes back to the first in line");
    assert.equal(short.generatedCount, 1);
  });
});

describe("priority isolation", () => {
  test("a priority request with n: 3 preempts three standard streams, not one, and its choices start together", () => {
    const s = scheduler(4, machine(0, 0, 0));
    const streams = Array.from({ length: 4 }, () => request(4));
    for (const r of streams) s.enqueue(r);
    untilAllSampled(s, streams);
    const [leader, ...siblings] = [request(30, "priority"), request(30, "priority"), request(30, "priority")];
    leader!.siblings.push(...siblings);
    s.enqueue(leader!);
    step(s);
    const group = [leader!, ...siblings];
    assert.deepEqual(
      group.map((r) => r.status),
      ["running", "running", "running"],
      "the whole group is admitted at once",
    );
    assert.equal(streams.filter((r) => r.status === "waiting").length, 3, "three standard streams gave way");
    assert.equal(s.stats().preemptions, 3);
    untilAllSampled(s, group, 5);
    assert.equal(
      group.every((r) => r.generatedCount > 0),
      true,
      "every choice samples within a few steps",
    );
  });

  test("standard is never starved: under a continuous priority stream it is admitted after a bounded number of priority admissions", () => {
    const s = scheduler(2, machine(0, 0, 0));
    const priorityRequest = () => request(4, "priority", { maxTokens: 3 });
    for (let i = 0; i < 2; i++) s.enqueue(priorityRequest());
    step(s);
    const standard = request(4);
    s.enqueue(standard);
    const admitted: EngineRequest[] = [];
    let steps = 0;
    while (standard.status === "waiting" && steps < 100) {
      // Two priority requests always wait: the stream never lets up.
      while (s.waiting.filter((r) => r.tier === "priority").length < 2) s.enqueue(priorityRequest());
      const before = s.waiting.filter((r) => r.tier === "priority");
      step(s);
      admitted.push(...before.filter((r) => r.status !== "waiting"));
      steps++;
    }
    assert.equal(standard.status, "running", `admitted after ${steps} steps`);
    const priorityAdmissions = admitted.filter((r) => r.admittedAt < standard.admittedAt).length;
    assert.ok(priorityAdmissions <= STANDARD_AGING_ADMISSIONS, `${priorityAdmissions} priority admissions went first`);
    for (let i = 0; i < 20; i++) {
      while (s.waiting.filter((r) => r.tier === "priority").length < 2) s.enqueue(priorityRequest());
      step(s);
      assert.equal(standard.status, "running", "and the priority stream does not preempt it");
    }
    assert.ok(standard.generatedCount >= 20);
  });

  test("starving standard requests take only the reserved share: priority never queues behind a backlog of them", () => {
    const s = scheduler(8, machine(0, 0, 0));
    const streams = Array.from({ length: 8 }, () => request(4, "default", { maxTokens: 200 }));
    for (const r of streams) s.enqueue(r);
    untilAllSampled(s, streams);
    const backlog = Array.from({ length: 12 }, () => request(4, "default", { maxTokens: 200 }));
    for (const r of backlog) s.enqueue(r);
    const standardTokens = () => [...streams, ...backlog].reduce((n, r) => n + r.generatedCount, 0);
    const before = standardTokens();
    // A priority request every step: the backlog is passed over until it is starving, and stays so.
    for (let i = 0; i < 60; i++) {
      const arriving = request(4, "priority", { maxTokens: 3 });
      s.enqueue(arriving);
      step(s);
      assert.equal(arriving.status, "running", `step ${i}: priority admitted at once`);
      const starvingRunning = s.running.filter((r) => r.tier === "default" && r.overtaken >= STANDARD_AGING_ADMISSIONS);
      if (i >= 10) assert.ok(starvingRunning.length >= standardReserve(8), `step ${i}: the reserve holds a starving standard request`);
    }
    assert.ok(standardTokens() - before >= 50, "standard decodes on its reserved sequence nearly every step");
  });

  test("preempted standard and flex requests resume and complete with the same tokens as an unpreempted run", () => {
    // The runner's part: a "model" whose next token depends on everything before it, so a token lost,
    // repeated or computed from the wrong cells changes every token after it.
    const draw = (r: EngineRequest) => 1 + (r.tokens.reduce((sum, t, i) => sum + t * (i + 1), 0) % 19);
    const run = (preempt: boolean) => {
      const s = scheduler(2, machine(0, 0, 0));
      const standard = request(30, "default", { maxTokens: 24 });
      const flex = request(12, "flex", { maxTokens: 24 });
      s.enqueue(standard);
      s.enqueue(flex);
      for (let i = 0; i < 60 && (standard.status !== "finished" || flex.status !== "finished"); i++) {
        if (preempt && i === 4) for (let k = 0; k < 2; k++) s.enqueue(request(6, "priority", { maxTokens: 3 }));
        step(s, draw);
      }
      return { s, standard, flex };
    };
    const reference = run(false);
    const preempted = run(true);
    assert.equal(preempted.s.stats().preemptions, 2, "both gave way");
    assert.equal(preempted.standard.status, "finished");
    assert.equal(preempted.flex.status, "finished");
    assert.deepEqual(preempted.standard.tokens, reference.standard.tokens);
    assert.deepEqual(preempted.flex.tokens, reference.flex.tokens);
  });

  test("a preempted request's cells are saved in the runner and restored when it is readmitted: it computes nothing again", () => {
    const s = scheduler(1, machine(0, 0, 0));
    const standard = request(40);
    s.enqueue(standard);
    for (let i = 0; i < 3; i++) step(s);
    const computed = standard.computed;
    s.enqueue(request(4, "priority", { maxTokens: 2 }));
    const preempting = step(s);
    assert.deepEqual(preempting.ops[0], { op: "save", seq: 0, key: standard.id }, "saved before the sequence is handed over");
    let plan = step(s);
    for (let i = 0; i < 5 && plan.restores.length === 0; i++) plan = step(s);
    assert.deepEqual(plan.restores, [standard]);
    assert.ok(plan.ops.some((op) => op.op === "restore" && op.key === standard.id));
    assert.equal(tokensOf(plan, standard), 0, "it sits out the step its cells come back in");
    assert.equal(standard.computed, computed, "then holds all it had computed");
    const next = step(s);
    assert.equal(tokensOf(next, standard), 1, "and decodes its next token, nothing computed again");
  });

  test("a restore the runner could not do: the request computes its tokens again", () => {
    const s = scheduler(1, machine(0, 0, 0));
    const standard = request(40);
    s.enqueue(standard);
    for (let i = 0; i < 3; i++) step(s);
    s.enqueue(request(4, "priority", { maxTokens: 2 }));
    // Plays the runner by hand until the step that restores: that restore fails.
    const reply = (plan: StepPlan, failedRestores: number[]) => ({
      type: "step" as const,
      tokens: Int32Array.from(plan.sampled.map(() => 1)),
      logprobs: plan.sampled.map(() => null),
      failedSamplers: [],
      failedRestores,
      setupMs: 0,
      decodeMs: 0,
      sampleMs: 0,
    });
    let plan = s.schedule();
    for (let i = 0; i < 6 && plan.restores.length === 0; i++) {
      s.update(plan, reply(plan, []));
      plan = s.schedule();
    }
    assert.deepEqual(plan.restores, [standard]);
    s.update(plan, reply(plan, [standard.id]));
    assert.equal(standard.computed, 0);
    const length = standard.tokens.length;
    assert.equal(tokensOf(step(s), standard), length, "it computes its tokens again");
  });

  test("a priority request goes where it waits least: a shard it can be admitted on, then the fewest priority streams, unless a long cached prefix is elsewhere", () => {
    const shardWith = (classes: ServiceTier[], sequences = 2) => {
      const scheduler = new ShardScheduler(
        { sequences, cellsPerSequence: 8192, stepTokens: 256, prefixCache: true },
        tieredPolicy,
        texts,
        machine(0, 0, 0),
      );
      const streams = classes.map((c) => request(4, c));
      for (const r of streams) scheduler.enqueue(r);
      untilAllSampled(scheduler, streams);
      return { scheduler };
    };
    const allPriority = shardWith(["priority", "priority"]);
    const standards = shardWith(["default", "default"]);
    assert.equal(
      chooseShard([allPriority, standards], request(4, "priority")),
      standards,
      "the full shard of priority streams cannot take it at once; standard there gives way",
    );
    const onePriority = shardWith(["priority"], 4);
    const idle = shardWith([], 4);
    assert.equal(
      chooseShard([onePriority, idle], request(4, "priority")),
      idle,
      "the shard without priority streams keeps the shorter steps",
    );
    // A conversation's next turn: its history is cached on the shard with the priority stream.
    const history = request(200, "priority", { cacheNamespace: "acct" });
    onePriority.scheduler.enqueue(history);
    untilAllSampled(onePriority.scheduler, [history]);
    onePriority.scheduler.abort(history, new Error("done"));
    step(onePriority.scheduler);
    const nextTurn = request(260, "priority", { cacheNamespace: "acct" });
    nextTurn.tokens.splice(0, 200, ...history.tokens.slice(0, 200));
    assert.equal(chooseShard([idle, onePriority], nextTurn), onePriority, "200 cached tokens outweigh a priority stream");
  });
});
