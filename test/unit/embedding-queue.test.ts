import assert from "node:assert/strict";
import { test } from "node:test";
import { vectorsJson, type EmbedReply } from "../../src/engine/embedding/embedding-protocol.js";
import { float32JsonText } from "../../src/protocol/float32-json.js";
import { waitFor } from "../helpers/server.js";
import { EmbeddingQueue, type QueuedInput } from "../../src/engine/embedding/embedding-queue.js";
import { QueueFullError } from "../../src/engine/errors.js";

/**
 * A runner that records each batch and answers when released: the queue's packing, not llama.cpp, is
 * under test. Each input's vector is [marker, 1, 1, ...] at unit length, as the real runner's are.
 */
function heldRunner(dimensions: number) {
  const batches: number[][] = [];
  const releases: Array<() => void> = [];
  const run = (batch: QueuedInput[]) =>
    new Promise<EmbedReply>((resolve) => {
      batches.push(batch.map((input) => input.tokens[0]!));
      releases.push(() =>
        resolve({
          type: "embedded",
          vectors: Float32Array.from(
            batch.flatMap((input) => {
              const vector = [input.tokens[0]!, ...Array<number>(dimensions - 1).fill(1)];
              return vector.map((v) => v / Math.hypot(...vector));
            }),
          ),
          decodeMs: 1,
        }),
      );
    });
  return { batches, run, releaseNext: () => releases.shift()!() };
}

const input = (marker: number, length: number) => Int32Array.from({ length }, () => marker);
const settle = () => new Promise((r) => setImmediate(r));

test("a free runner takes the most demanding tier's oldest input, then whatever else fits its tokens", async () => {
  const runner = heldRunner(2);
  const queue = new EmbeddingQueue({ batchTokens: 10, batchSequences: 3, maxWaiting: 100, dimensions: 2, runners: [runner.run] });
  const first = queue.submit([input(1, 4)], "flex"); // runs alone at once: the runner was idle
  const flex = queue.submit([input(2, 4)], "flex");
  const standard = queue.submit([input(3, 8), input(4, 2)], "default");
  const priority = queue.submit([input(5, 6)], "priority");
  runner.releaseNext();
  await settle();
  // Priority's 6 tokens, then standard's 2-token input (its 8-token one does not fit beside them).
  assert.deepEqual(runner.batches, [[1], [5, 4]]);
  runner.releaseNext();
  await settle();
  assert.deepEqual(runner.batches[2], [3]);
  runner.releaseNext();
  await settle();
  assert.deepEqual(runner.batches[3], [2]);
  runner.releaseNext();
  const vectors = await Promise.all([first, flex, standard, priority]);
  // Every input's vector came back to its own request, in order.
  const unit = (marker: number) => Array.from(Float32Array.from([marker, 1], (v) => v / Math.hypot(marker, 1)));
  assert.deepEqual(
    vectors.map((v) => v.vectors.map((x) => Array.from(x))),
    [[unit(1)], [unit(2)], [unit(3), unit(4)], [unit(5)]],
  );
});

test("a request that asks for JSON gets each vector's text from the runner's reply; one batched beside it that did not, none", async () => {
  const runner = heldRunner(2);
  const withJson = (batch: QueuedInput[]) =>
    runner.run(batch).then((reply) => (batch.some((input) => input.json) ? { ...reply, json: vectorsJson(reply.vectors, 2) } : reply));
  const queue = new EmbeddingQueue({ batchTokens: 10, batchSequences: 4, maxWaiting: 100, dimensions: 2, runners: [withJson] });
  const first = queue.submit([input(1, 2)], "default", undefined, true); // runs alone
  const plain = queue.submit([input(2, 2)], "default");
  const asked = queue.submit([input(3, 2), input(4, 2)], "default", undefined, true);
  runner.releaseNext();
  await settle();
  runner.releaseNext();
  const [alone, without, texts] = await Promise.all([first, plain, asked]);
  assert.deepEqual(runner.batches, [[1], [2, 3, 4]]);
  assert.equal(without.json, undefined);
  for (const { vectors, json } of [alone, texts]) assert.deepEqual(json, vectors.map(float32JsonText));
});

test("an aborted request's waiting inputs never run; a full queue refuses", async () => {
  const runner = heldRunner(1);
  const queue = new EmbeddingQueue({ batchTokens: 4, batchSequences: 8, maxWaiting: 3, dimensions: 1, runners: [runner.run] });
  const running = queue.submit([input(1, 4)], "default");
  const controller = new AbortController();
  const aborted = queue.submit([input(2, 1), input(3, 1)], "default", controller.signal);
  await assert.rejects(queue.submit([input(4, 1), input(5, 1)], "default"), QueueFullError);
  controller.abort();
  await assert.rejects(aborted, /aborted/);
  runner.releaseNext();
  await running;
  await settle();
  assert.deepEqual(runner.batches, [[1]]);
  assert.equal(queue.stats().waitingInputs, 0);
});

test("while priority work runs elsewhere, lower tiers' batches start at most once a pace; priority's go at once", async () => {
  const runner = heldRunner(1);
  let priorityElsewhere = true;
  // A pace far longer than the checks below take, even on a slow machine.
  const pace = 1500;
  const queue = new EmbeddingQueue({
    batchTokens: 4,
    batchSequences: 8,
    maxWaiting: 100,
    dimensions: 1,
    runners: [runner.run],
    giveWay: () => priorityElsewhere,
    lowerTierPaceMs: pace,
  });
  const first = queue.submit([input(1, 4)], "default"); // nothing lower ran within the pace: it starts
  const second = queue.submit([input(2, 4)], "default");
  const priority = queue.submit([input(3, 4)], "priority");
  runner.releaseNext();
  await settle();
  assert.deepEqual(runner.batches, [[1], [3]], "priority's input goes next; the default one waits for its pace");
  runner.releaseNext();
  await Promise.all([first, priority]);
  await settle();
  assert.equal(runner.batches.length, 2, "within the pace, the idle runner still holds the default input back");
  const started = await waitFor(async () => runner.batches[2], 30_000);
  assert.deepEqual(started, [2], "never starved: it starts once the pace has passed");
  runner.releaseNext();
  await second;
  priorityElsewhere = false;
  const free = queue.submit([input(4, 4)], "default");
  const again = queue.submit([input(5, 4)], "default");
  await settle();
  assert.deepEqual(runner.batches[3], [4], "with no priority work elsewhere, no pace");
  runner.releaseNext();
  await settle();
  assert.deepEqual(runner.batches[4], [5]);
  runner.releaseNext();
  await Promise.all([free, again]);
});

test("while priority work runs elsewhere, a batch holds few of lower tiers' tokens (a longer input runs alone); otherwise a full batch", async () => {
  const runner = heldRunner(1);
  let priorityElsewhere = true;
  const queue = new EmbeddingQueue({
    batchTokens: 10,
    batchSequences: 8,
    maxWaiting: 100,
    dimensions: 1,
    runners: [runner.run],
    giveWay: () => priorityElsewhere,
    lowerTierPaceMs: 0,
    lowerTierBatchTokens: 4,
  });
  const small = queue.submit([input(1, 3), input(2, 3), input(3, 3)], "default");
  const long = queue.submit([input(4, 6)], "flex");
  await settle();
  assert.deepEqual(runner.batches, [[1]], "3 tokens, and 3 more would pass the cap of 4");
  for (const expected of [[2], [3], [4]]) {
    runner.releaseNext();
    await settle();
    assert.deepEqual(runner.batches.at(-1), expected);
  }
  runner.releaseNext();
  await Promise.all([small, long]);
  priorityElsewhere = false;
  const hold = queue.submit([input(9, 10)], "default"); // occupies the runner
  const full = queue.submit([input(5, 3), input(6, 3), input(7, 3)], "default");
  await settle();
  runner.releaseNext();
  await settle();
  assert.deepEqual(runner.batches.at(-1), [5, 6, 7], "no priority work elsewhere: the whole batch");
  runner.releaseNext();
  await Promise.all([hold, full]);
});

test("a failed batch fails its requests, and their inputs still waiting leave the queue with them", async () => {
  const batches: number[][] = [];
  const failing = async (batch: QueuedInput[]): Promise<EmbedReply> => {
    batches.push(batch.map((input) => input.tokens[0]!));
    throw new Error("runner crashed");
  };
  const queue = new EmbeddingQueue({ batchTokens: 4, batchSequences: 8, maxWaiting: 10, dimensions: 1, runners: [failing] });
  const request = queue.submit([input(1, 4), input(2, 4), input(3, 4)], "default");
  await assert.rejects(request, /runner crashed/);
  assert.equal(queue.stats().waitingInputs, 0);
  await settle();
  assert.deepEqual(batches, [[1]], "the request's other inputs never ran");
});

test("a request's inputs are batched shortest first, so a batch holds like lengths; each vector goes back to its own index", async () => {
  const runner = heldRunner(2);
  const queue = new EmbeddingQueue({ batchTokens: 12, batchSequences: 8, maxWaiting: 100, dimensions: 2, runners: [runner.run] });
  const lengths = [9, 2, 8, 3, 2, 9, 3];
  const answer = queue.submit(
    lengths.map((length, i) => input(i + 1, length)),
    "default",
  );
  for (let i = 0; i < 4; i++) {
    await settle();
    runner.releaseNext();
  }
  const { vectors } = await answer;
  // By length: 2, 2, 3, 3 (10 tokens), then 8, then 9, then 9; ties in the order sent.
  assert.deepEqual(runner.batches, [[2, 5, 4, 7], [3], [1], [6]]);
  const marker = (v: Float32Array) => Math.round(v[0]! / v[1]!);
  assert.deepEqual(
    vectors.map(marker),
    lengths.map((_, i) => i + 1),
  );
});
