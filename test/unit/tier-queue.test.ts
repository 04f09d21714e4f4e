import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { QueueFullError, WaitExpiredError } from "../../src/engine/errors.js";
import { refuseWhenFull, startFlexWait, TierQueue, type Verdict } from "../../src/engine/tier-queue.js";

const takeAll = () => "take" as Verdict;
/** A group's exits that record why it was dropped. */
function recorder() {
  const reasons: unknown[] = [];
  return { reasons, exits: (signal?: AbortSignal) => ({ signal, dropped: (reason: unknown) => reasons.push(reason) }) };
}

test("items are taken priority first, then standard, flex and batch, first come first served within a tier", () => {
  const queue = new TierQueue<string>({ maxWaiting: 10, unit: "requests" });
  const { exits } = recorder();
  queue.enqueue("batch", ["batch"], exits());
  queue.enqueue("flex", ["flex"], exits());
  queue.enqueue("default", ["default-1"], exits());
  queue.enqueue("default", ["default-2", "default-3"], exits());
  queue.enqueue("priority", ["priority"], exits());
  assert.deepEqual(queue.sizeByTier(), { priority: 1, default: 3, flex: 1, batch: 1 });
  assert.deepEqual(queue.take(takeAll), ["priority", "default-1", "default-2", "default-3", "flex", "batch"]);
  assert.equal(queue.size, 0);
});

test("the cap counts items, admits a group all or none, and refuses with the one QueueFullError", () => {
  const queue = new TierQueue<number>({ maxWaiting: 3, unit: "inputs" });
  const { exits } = recorder();
  queue.enqueue("default", [1, 2], exits());
  assert.throws(
    () => queue.enqueue("priority", [3, 4], exits()),
    (error: unknown) => {
      assert.ok(error instanceof QueueFullError);
      assert.equal(error.message, "The queue for this model is full (3 inputs waiting).");
      return true;
    },
  );
  assert.equal(queue.size, 2, "nothing of the refused group waits");
  queue.enqueue("priority", [3], exits());
  assert.equal(queue.size, 3);
  assert.throws(() => refuseWhenFull(4, 1, { maxWaiting: 4, unit: "requests" }), /full \(4 requests waiting\)/);
  refuseWhenFull(3, 1, { maxWaiting: 4, unit: "requests" });
});

test("the taker's rule decides what fits: left items keep their place, stop ends the visit", () => {
  const queue = new TierQueue<number>({ maxWaiting: 10, unit: "inputs" });
  const { exits } = recorder();
  queue.enqueue("priority", [6], exits());
  queue.enqueue("default", [8, 2, 1], exits());
  queue.enqueue("flex", [1], exits());
  let room = 9;
  const offered: number[] = [];
  const batch = queue.take((size) => {
    offered.push(size);
    if (room === 0) return "stop";
    if (size > room) return "leave";
    room -= size;
    return "take";
  });
  assert.deepEqual(batch, [6, 2, 1], "the 8 does not fit beside the 6; the 2 and 1 behind it do");
  assert.deepEqual(offered, [6, 8, 2, 1, 1], "the visit stopped at flex's item once the batch was full");
  assert.deepEqual(queue.take(takeAll), [8, 1], "what was left waits in its place");
});

test("a flex group not taken within its wait is dropped with the one WaitExpiredError and its message", async () => {
  const queue = new TierQueue<string>({ maxWaiting: 10, unit: "requests", flexMaxWaitMs: 20 });
  const { reasons, exits } = recorder();
  queue.enqueue("flex", ["flex-a", "flex-b"], exits());
  queue.enqueue("default", ["standard"], exits());
  await sleep(60);
  assert.equal(reasons.length, 1, "dropped once, as a group");
  assert.ok(reasons[0] instanceof WaitExpiredError);
  assert.equal((reasons[0] as Error).message, "No capacity for this flex request within 0 s.");
  assert.deepEqual(queue.sizeByTier(), { priority: 0, default: 1, flex: 0, batch: 0 });
  assert.deepEqual(queue.take(takeAll), ["standard"], "the standard request never expires");
});

test("a flex group taken in time never expires; without a limit flex waits like the others", async () => {
  const queue = new TierQueue<string>({ maxWaiting: 10, unit: "requests", flexMaxWaitMs: 20 });
  const unlimited = new TierQueue<string>({ maxWaiting: 10, unit: "inputs" });
  const { reasons, exits } = recorder();
  queue.enqueue("flex", ["flex"], exits());
  unlimited.enqueue("flex", ["flex"], exits());
  assert.deepEqual(queue.take(takeAll), ["flex"]);
  await sleep(60);
  assert.deepEqual(reasons, []);
  assert.equal(unlimited.size, 1);
});

test("the flex wait's message names the limit in whole seconds; a stopped wait and other tiers never fire", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const expired: Error[] = [];
  startFlexWait("flex", 2_500, (error) => expired.push(error));
  startFlexWait("default", 2_500, (error) => expired.push(error));
  const stop = startFlexWait("flex", 1_000, (error) => expired.push(error));
  stop();
  t.mock.timers.tick(60_000);
  assert.deepEqual(
    expired.map((e) => [e instanceof WaitExpiredError, e.message]),
    [[true, "No capacity for this flex request within 3 s."]],
  );
});

test("an abort drops the group's waiting items with the signal's reason; one taken already is the owner's", () => {
  const queue = new TierQueue<string>({ maxWaiting: 10, unit: "inputs" });
  const { reasons, exits } = recorder();
  const controller = new AbortController();
  queue.enqueue("default", ["a", "b"], exits(controller.signal));
  queue.enqueue("default", ["other"], exits());
  assert.deepEqual(
    queue.take((item) => (item === "a" ? "take" : "leave")),
    ["a"],
  );
  controller.abort(new Error("gone"));
  assert.deepEqual(
    reasons.map((r) => (r as Error).message),
    ["gone"],
  );
  assert.equal(queue.size, 1, "b left with its group");
  assert.deepEqual(queue.take(takeAll), ["other"]);

  const taken = new AbortController();
  queue.enqueue("default", ["c"], exits(taken.signal));
  queue.take(takeAll);
  taken.abort();
  assert.equal(reasons.length, 1, "a group wholly taken no longer listens");
});

test("a signal already aborted queues nothing", () => {
  const queue = new TierQueue<string>({ maxWaiting: 10, unit: "requests" });
  const controller = new AbortController();
  controller.abort(new Error("too late"));
  assert.throws(() => queue.enqueue("default", ["x"], recorder().exits(controller.signal)), /too late/);
  assert.equal(queue.size, 0);
});

test("withdraw takes a group's waiting items out without dropping it; clear empties the queue", async () => {
  const queue = new TierQueue<string>({ maxWaiting: 10, unit: "inputs", flexMaxWaitMs: 20 });
  const { reasons, exits } = recorder();
  const place = queue.enqueue("flex", ["a", "b"], exits());
  queue.enqueue("priority", ["p"], exits());
  place.withdraw();
  assert.deepEqual(queue.sizeByTier(), { priority: 1, default: 0, flex: 0, batch: 0 });
  queue.enqueue("default", ["d"], exits());
  queue.enqueue("flex", ["f"], exits());
  assert.deepEqual(queue.clear(), ["p", "d", "f"]);
  assert.equal(queue.size, 0);
  await sleep(60);
  assert.deepEqual(reasons, [], "neither a withdrawn nor a cleared group is dropped, nor does its flex wait fire");
  assert.deepEqual(queue.take(takeAll), []);
});
