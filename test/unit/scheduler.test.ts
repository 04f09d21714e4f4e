import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeFirstThenPrefill } from "../../src/engine/batch-policy.js";
import { QueueFullError, SlotScheduler, WaitExpiredError, type SchedulingClass, type SlotLease } from "../../src/engine/scheduler.js";
import type { BatchItem, EvaluationPriority, Token } from "node-llama-cpp";

const scheduler = (slots: number, maxWaiting = 16, flexMaxWaitMs = 60_000) => new SlotScheduler({ slots, maxWaiting, flexMaxWaitMs });
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Starts `acquire` calls in order; each is released as soon as granted. Resolves to the order of grants. */
async function grantOrder(s: SlotScheduler, classes: SchedulingClass[], afterQueued: () => void): Promise<string[]> {
  const granted: string[] = [];
  const all = classes.map((c, i) =>
    s.acquire(c).then((lease) => {
      granted.push(`${c}${i}`);
      setImmediate(() => lease.release());
    }),
  );
  await tick();
  afterQueued();
  await Promise.all(all);
  return granted;
}

describe("slot scheduler", () => {
  it("admits at once while slots are free", async () => {
    const s = scheduler(2);
    await s.acquire("flex");
    await s.acquire("standard");
    assert.deepEqual(s.stats().running, { priority: 0, standard: 1, flex: 1 });
  });

  it("hands freed slots to priority, then standard, then flex, oldest first within a class", async () => {
    const s = scheduler(1);
    const holder = await s.acquire("standard");
    const granted = await grantOrder(s, ["flex", "standard", "priority", "standard", "priority"], () => {
      assert.deepEqual(s.stats().waiting, { priority: 2, standard: 2, flex: 1 });
      holder.release();
    });
    assert.deepEqual(granted, ["priority2", "priority4", "standard1", "standard3", "flex0"]);
  });

  it("fails a flex request that waited past its limit, and only flex", async () => {
    const s = scheduler(1, 16, 50);
    const holder = await s.acquire("priority");
    const flex = s.acquire("flex");
    const standard = s.acquire("standard");
    await assert.rejects(flex, WaitExpiredError);
    assert.equal(s.stats().waiting.flex, 0);
    holder.release();
    (await standard).release();
  });

  it("refuses new requests beyond the wait bound", async () => {
    const s = scheduler(1, 1);
    const holder = await s.acquire("standard");
    const waiting = s.acquire("standard");
    await assert.rejects(s.acquire("priority"), QueueFullError);
    holder.release();
    (await waiting).release();
  });

  it("a waiter that aborts leaves the queue", async () => {
    const s = scheduler(1);
    const holder = await s.acquire("standard");
    const controller = new AbortController();
    const waiting = s.acquire("standard", { signal: controller.signal });
    controller.abort(new Error("gone"));
    await assert.rejects(waiting, /gone/);
    assert.equal(s.stats().waiting.standard, 0);
    holder.release();
    assert.equal(s.stats().running.standard, 0);
  });

  it("preempts the latest flex request for a waiting standard or priority one; the preempted one resumes first among flex", async () => {
    const s = scheduler(2);
    const flexA = await s.acquire("flex");
    const flexB = await s.acquire("flex");
    const newFlex = s.acquire("flex");
    const priority = s.acquire("priority");
    await tick();
    assert.equal(flexB.preemption.aborted, true, "the flex admitted last is asked back");
    assert.equal(flexA.preemption.aborted, false);
    assert.equal(s.stats().preemptions, 1);
    // The preempted request hands its slot back and queues again as `resumed`.
    flexB.release();
    const resumed = s.acquire("flex", { resumed: true });
    const p = await priority;
    assert.equal(p.schedulingClass, "priority");
    flexA.release();
    const next = await Promise.race([resumed.then(() => "resumed"), newFlex.then(() => "new")]);
    assert.equal(next, "resumed");
    for (const lease of [p, await resumed]) lease.release();
    (await newFlex).release();
  });

  it("a priority request with no flex to take preempts the standard request admitted last; a standard one preempts none", async () => {
    const s = scheduler(2);
    const first = await s.acquire("standard");
    const second = await s.acquire("standard");
    const standard = s.acquire("standard");
    await tick();
    assert.equal(s.stats().preemptions, 0, "standard never preempts standard");
    const priority = s.acquire("priority");
    await tick();
    assert.deepEqual([first.preemption.aborted, second.preemption.aborted], [false, true]);
    second.release();
    const resumed = s.acquire("standard", { resumed: true });
    (await priority).release();
    assert.equal(await Promise.race([resumed.then(() => "resumed"), standard.then(() => "new")]), "resumed", "the preempted request goes first among standard");
    (await resumed).release();
    first.release();
    (await standard).release();
  });

  it("a resumed flex request is not subject to the wait limit or the queue bound", async () => {
    const s = scheduler(1, 0, 10);
    const holder: SlotLease = await s.acquire("standard");
    const resumed = s.acquire("flex", { resumed: true });
    await new Promise((resolve) => setTimeout(resolve, 40));
    holder.release();
    (await resumed).release();
  });
});

describe("batch policy: decode first, then prompt chunks", () => {
  const item = (tokens: number, evaluationPriority: EvaluationPriority): BatchItem => ({
    tokens: Array.from({ length: tokens }, (_, i) => i as Token),
    logits: [],
    evaluationPriority,
  });

  it("gives every decode step its token before any prompt, then fills the budget by class", () => {
    const longFlexPrompt = item(1000, 1);
    const standardPrompt = item(300, 3);
    const decodes = [item(1, 1), item(1, 5), item(1, 3)];
    const batch = decodeFirstThenPrefill({ items: [longFlexPrompt, ...decodes, standardPrompt], size: 256 });
    assert.deepEqual(
      batch.map((b) => [b.item.tokens.length, b.item.evaluationPriority, b.processAmount]),
      [
        [1, 5, 1],
        [1, 3, 1],
        [1, 1, 1],
        [300, 3, 253],
      ],
    );
  });

  it("splits a long prompt over steps when it is alone", () => {
    const prompt = item(600, 3);
    assert.deepEqual(decodeFirstThenPrefill({ items: [prompt], size: 256 }).map((b) => b.processAmount), [256]);
  });
});
