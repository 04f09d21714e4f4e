import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { tieredPolicy } from "../../src/engine/core/policy.js";
import { EngineRequest } from "../../src/engine/core/request.js";
import { StepCostModel } from "../../src/engine/core/cost-model.js";
import { ShardScheduler } from "../../src/engine/core/scheduler.js";
import type { StepPlan } from "../../src/engine/core/step-plan.js";
import { step, GREEDY_SAMPLER as SAMPLER } from "../helpers/scheduler-steps.js";
import type { GenerationRequest } from "../../src/engine/types.js";
import type { GenerationEvent } from "../../src/protocol/generation.js";
import type { ServiceTier } from "../../src/protocol/tiers.js";

// The scheduler's decisions on their own: which tokens each step carries, who is admitted, who
// gives way. The runner is not involved: each test plays the runner's part by hand (every sample
// draws token 1, "a"), so the steps are exact. The real runner is covered by the integration tests.
const EOS = 0;
const texts = {
  pieceBytes: (token: number) => (token === EOS ? new Uint8Array() : new Uint8Array([96 + token])),
  tokenText: (token: number) => String.fromCharCode(96 + token),
  isEndOfGeneration: (token: number) => token === EOS,
};

function request(promptLength: number, tier: ServiceTier = "default", extra: Partial<GenerationRequest> = {}): EngineRequest {
  const promptTokens = Array.from({ length: promptLength }, (_, i) => 1 + (i % 20));
  return new EngineRequest({ promptTokens, maxTokens: 1000, sampling: { temperature: 0, topP: 1 }, stop: [], tier, ...extra }, SAMPLER);
}

/** A machine whose steps cost nothing: only the token budget limits a step (the time budget is tested in step-budget.test.ts). */
const free = () => new StepCostModel({ prior: [0, 0, 0, 0] });

function scheduler(
  sequences: number,
  stepTokens: number,
  options: { cells?: number; prefixCache?: boolean; pausedPreemptMs?: number } = {},
) {
  const { cells = 4096, prefixCache = true, pausedPreemptMs } = options;
  return new ShardScheduler(
    { sequences, cellsPerSequence: cells, stepTokens, prefixCache, stallTimeoutMs: 60_000, pausedPreemptMs },
    tieredPolicy,
    texts,
    free(),
  );
}

const tokensOf = (plan: StepPlan, r: EngineRequest) => plan.scheduled.find((s) => s.request === r)?.count ?? 0;

async function events(r: EngineRequest): Promise<GenerationEvent[]> {
  const out: GenerationEvent[] = [];
  for await (const event of r.events.drain()) out.push(event);
  return out;
}

describe("the engine's step scheduler", () => {
  test("running decodes come first, then prompt chunks under the step's token budget", () => {
    const s = scheduler(4, 64);
    const a = request(10);
    s.enqueue(a);
    step(s); // a's whole prompt, then its first token
    assert.equal(a.generatedCount, 1);
    const b = request(200);
    s.enqueue(b);
    const plan = step(s);
    assert.equal(tokensOf(plan, a), 1, "the running request decodes its token");
    assert.equal(tokensOf(plan, b), 63, "the new prompt gets what is left of the budget");
    assert.equal(plan.batchSize, 64);
    assert.equal(b.generatedCount, 0, "no sample before the whole prompt is computed");
    step(s);
    step(s);
    step(s);
    assert.equal(b.computed + b.pending - 1, 200, "the prompt is computed across steps, then sampled");
    assert.equal(b.generatedCount, 1);
  });

  test("a priority prompt's chunks go before standard prompt chunks in the same step", () => {
    const s = scheduler(4, 32);
    const standard = request(100);
    s.enqueue(standard);
    step(s);
    const priority = request(40, "priority");
    s.enqueue(priority);
    const plan = step(s);
    assert.equal(tokensOf(plan, priority), 32);
    assert.equal(tokensOf(plan, standard), 0);
  });

  test("admission waits for a free sequence rather than overcommit the KV cells", () => {
    const s = scheduler(2, 256, { cells: 64 });
    const requests = [request(8), request(8), request(8)];
    for (const r of requests) s.enqueue(r);
    step(s);
    assert.deepEqual(
      requests.map((r) => r.status),
      ["running", "running", "waiting"],
    );
    assert.equal(s.stats().usedCells <= s.stats().totalCells, true);
    requests[0]!.abortRequested = true;
    step(s);
    assert.equal(requests[2]!.status, "running", "the freed sequence goes to the one waiting, in the next step");
  });

  test("a request that would outgrow its sequence's cells finishes with length", async () => {
    const s = scheduler(1, 256, { cells: 12 });
    const r = request(8);
    s.enqueue(r);
    for (let i = 0; i < 10 && r.status !== "finished"; i++) step(s);
    const all = await events(r);
    assert.deepEqual(all.at(-1), { type: "finish", reason: "length", completionTokens: 4 });
  });

  test("a priority request arriving while every sequence streams preempts the standard one admitted last and samples within the prompt's chunks", () => {
    const s = scheduler(16, 64);
    const streams = Array.from({ length: 16 }, () => request(4));
    for (const r of streams) s.enqueue(r);
    for (let i = 0; i < 3; i++) step(s);
    assert.equal(
      streams.every((r) => r.status === "running"),
      true,
    );
    const priority = request(100, "priority");
    s.enqueue(priority);
    let steps = 0;
    while (priority.generatedCount === 0) {
      step(s);
      steps++;
      assert.ok(steps <= 3, "100 prompt tokens at 49 a step (64 less 15 decodes) take 3 steps");
    }
    assert.equal(steps, 3);
    const victim = streams.at(-1)!;
    assert.equal(victim.status, "waiting");
    assert.equal(victim.resumed, true);
    assert.equal(s.stats().preemptions, 1);
  });

  test("flex gives way to standard; a preempted request resumes where it stopped", async () => {
    const s = scheduler(1, 64);
    const flex = request(4, "flex");
    s.enqueue(flex);
    step(s);
    step(s);
    const generated = flex.generatedCount;
    const standard = request(4);
    s.enqueue(standard);
    step(s);
    assert.equal(flex.status, "waiting");
    assert.equal(flex.computed, 0, "its cells were given up");
    let plan: StepPlan | undefined;
    while (standard.status !== "finished") {
      standard.abortRequested = standard.generatedCount >= 2;
      plan = step(s);
    }
    assert.equal(flex.status, "running", "readmitted in the step that freed the sequence");
    assert.equal(tokensOf(plan!, flex), 4 + generated, "its prompt and generated tokens are computed again");
    assert.equal(flex.generatedCount, generated + 1, "and sampling goes on where it stopped");
    flex.abortRequested = true;
    step(s);
    const kinds = (await events(flex)).map((e) => e.type);
    assert.deepEqual(
      kinds.filter((k) => k !== "text"),
      ["started", "preempted", "finish"],
    );
  });

  test("batch ranks below flex: a waiting flex request takes a batch line's sequence, and batch is preempted before flex", () => {
    const s = scheduler(2, 64);
    const flex = request(4, "flex");
    const line = request(4, "batch");
    s.enqueue(line);
    s.enqueue(flex);
    step(s);
    assert.equal(flex.status, "running");
    assert.equal(line.status, "running", "idle capacity runs a batch line");
    const waitingFlex = request(4, "flex");
    s.enqueue(waitingFlex);
    step(s);
    assert.equal(line.status, "waiting", "the batch line gave its sequence to the waiting flex request");
    assert.equal(flex.status, "running", "the running flex request keeps its sequence");
    assert.equal(waitingFlex.status, "running");
    const standard = request(4);
    s.enqueue(standard);
    const laterLine = request(4, "batch");
    s.enqueue(laterLine);
    step(s);
    assert.equal(standard.status, "running", "standard takes a flex sequence");
    assert.equal(laterLine.status, "waiting", "a batch line waits behind every other tier");
    assert.equal(line.status, "waiting");
  });

  test("the prefix cache reuses a finished prompt within its namespace and never across", () => {
    const s = scheduler(2, 256);
    const first = request(50, "default", { cacheNamespace: "acct-a" });
    s.enqueue(first);
    step(s);
    first.abortRequested = true;
    step(s);
    const same = request(60, "default", { cacheNamespace: "acct-a" });
    same.tokens.splice(0, 50, ...first.tokens.slice(0, 50));
    const other = request(60, "default", { cacheNamespace: "acct-b" });
    other.tokens.splice(0, 50, ...first.tokens.slice(0, 50));
    s.enqueue(other);
    s.enqueue(same);
    const plan = step(s);
    assert.equal(tokensOf(plan, other), 60, "another account computes its whole prompt");
    assert.equal(tokensOf(plan, same), 10, "the same account reuses the 50 cached tokens");
  });

  test("a prompt that shares only its start with a cached one copies that part into a spare sequence; the cached prompt stays whole", () => {
    const s = scheduler(3, 512);
    const finish = (r: EngineRequest) => {
      s.enqueue(r);
      while (r.computed < r.tokens.length - 1) step(s);
      r.abortRequested = true;
      step(s);
    };
    const document = request(600, "default", { cacheNamespace: "acct-a" });
    finish(document);
    // The same conversation's first 300 tokens, then another turn: the 300 are copied.
    const another = request(400, "default", { cacheNamespace: "acct-a" });
    another.tokens.splice(0, 400, ...document.tokens.slice(0, 300), ...Array.from({ length: 100 }, (_, i) => 30 + (i % 7)));
    s.enqueue(another);
    const plan = step(s);
    assert.equal(tokensOf(plan, another), 100, "the shared 300 tokens are reused");
    assert.ok(
      plan.ops.some((op) => op.op === "cp" && op.dst === another.sequence) &&
        plan.ops.some((op) => op.op === "rm" && op.seq === another.sequence && op.from === 300),
    );
    // A third prompt sharing only a start shorter than a copy is worth (8 tokens at 512 cells) is
    // computed again in the other spare.
    const short = request(300, "default", { cacheNamespace: "acct-a" });
    short.tokens.splice(0, 300, ...document.tokens.slice(0, 6), ...Array.from({ length: 294 }, (_, i) => 40 + (i % 5)));
    s.enqueue(short);
    const shortPlan = step(s);
    assert.ok(!shortPlan.ops.some((op) => op.op === "cp"));
    // The first document again: all of it is still cached, in its own sequence.
    another.abortRequested = true;
    short.abortRequested = true;
    step(s);
    const again = request(600, "default", { cacheNamespace: "acct-a" });
    again.tokens.splice(0, 600, ...document.tokens.slice(0, 600));
    s.enqueue(again);
    assert.equal(tokensOf(step(s), again), 1, "only the last token (its logits) is computed again");
  });
});

describe("a request whose caller is not reading", () => {
  test("within its grace period it keeps its sequence, out of every batch", () => {
    const s = scheduler(1, 64, { pausedPreemptMs: 60_000 });
    const paused = request(20);
    s.enqueue(paused);
    step(s);
    s.setPaused(paused, true);
    const other = request(4);
    s.enqueue(other);
    const plan = step(s);
    assert.equal(tokensOf(plan, paused), 0, "it sits out");
    assert.equal(paused.status, "running");
    assert.equal(other.status, "waiting");
    assert.equal(s.nextCheckMs, 1000, "an idle shard wakes for its stall check, due before the grace period ends");
  });

  test("past its grace period it gives its sequence to the next waiting request, waits without being admitted, and resumes where it stopped", async () => {
    const s = scheduler(1, 64, { pausedPreemptMs: 0 });
    const paused = request(20);
    s.enqueue(paused);
    step(s);
    step(s);
    const generated = paused.generatedCount;
    s.setPaused(paused, true);
    const other = request(4);
    s.enqueue(other);
    const preempting = step(s);
    assert.ok(
      preempting.ops.some((op) => op.op === "save"),
      "its 21 computed cells are saved",
    );
    assert.equal(paused.status, "waiting");
    assert.equal(other.status, "running", "the sequence went to the waiting request in the same step");
    assert.deepEqual([s.stats().waiting.default, s.stats().paused, s.stats().preemptions], [0, 1, 1], "it is paused, not queue load");
    while ((other.status as string) !== "finished") {
      other.abortRequested = other.generatedCount >= 2;
      step(s);
    }
    step(s);
    assert.equal(paused.status, "waiting", "a free sequence does not readmit it while its caller still does not read");
    assert.equal(s.stats().running.default, 0);
    s.setPaused(paused, false);
    const resuming = step(s);
    assert.equal(paused.status, "running");
    assert.ok(
      resuming.ops.some((op) => op.op === "restore" || op.op === "forget"),
      "its saved cells come back (or the prefix cache already has them)",
    );
    while (paused.generatedCount === generated) step(s);
    assert.equal(paused.generatedCount, generated + 1, "sampling goes on where it stopped");
    paused.abortRequested = true;
    step(s);
    const kinds = (await events(paused)).map((e) => e.type);
    assert.deepEqual(
      kinds.filter((k) => k !== "text"),
      ["started", "preempted", "finish"],
    );
  });

  test("all the choices of one request yield, and a preempted one that fails frees its sampler", async () => {
    const s = scheduler(2, 64, { pausedPreemptMs: 0 });
    const leader = request(20);
    const sibling = request(20);
    leader.siblings.push(sibling);
    s.enqueue(leader);
    for (let i = 0; i < 3; i++) step(s);
    assert.deepEqual([leader.status, sibling.status], ["running", "running"]);
    for (const r of [leader, sibling]) s.setPaused(r, true);
    step(s);
    assert.deepEqual([leader.status, sibling.status], ["waiting", "waiting"]);
    assert.equal(s.freeSequences, 2);
    s.fail(sibling, new Error("its reader never came back"));
    assert.ok(s.schedule().freeSamplers.includes(sibling.id), "the runner drops its sampler");
    await assert.rejects(events(sibling), /never came back/);
  });
});

describe("accounts share a shard", () => {
  const of = (account: string, tier: ServiceTier = "default") => request(4, tier, { account, cacheNamespace: account });

  test("an account holding no sequence takes one from the account holding most, which keeps the rest; the next free sequence goes to the account holding fewest", () => {
    const s = scheduler(4, 64);
    const backlog = Array.from({ length: 6 }, () => of("a"));
    for (const r of backlog) s.enqueue(r);
    step(s);
    assert.deepEqual(
      backlog.map((r) => r.status),
      ["running", "running", "running", "running", "waiting", "waiting"],
    );
    const first = of("b");
    s.enqueue(first);
    step(s);
    assert.equal(first.status, "running", "admitted in the step it arrived in");
    assert.equal(backlog[3]!.status, "waiting", "the request of a admitted last gave way");
    assert.equal(backlog[3]!.resumed, true);
    const second = of("b");
    s.enqueue(second);
    step(s);
    assert.equal(second.status, "waiting", "b holds a sequence now: it waits its turn, taking none");
    backlog[0]!.abortRequested = true;
    step(s);
    assert.equal(second.status, "running", "the freed sequence goes to b (1 held) before a's queue (2 held)");
    assert.equal(backlog[3]!.status, "waiting");
  });

  test("a lower tier takes no sequence from a higher one, and the same account never preempts itself", () => {
    const s = scheduler(2, 64);
    const standard = [of("a"), of("a")];
    for (const r of standard) s.enqueue(r);
    step(s);
    const flex = of("b", "flex");
    const same = of("a");
    s.enqueue(flex);
    s.enqueue(same);
    step(s);
    assert.deepEqual(
      [...standard, flex, same].map((r) => r.status),
      ["running", "running", "waiting", "waiting"],
    );
    assert.equal(s.stats().preemptions, 0);
  });
});
