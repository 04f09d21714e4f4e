import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { batchCapacity } from "../../src/batches/capacity.js";
import { perTier, SERVICE_TIERS, sumPerTier, TIER_RANK, tierTotal, type PerTier } from "../../src/protocol/tiers.js";
import type { ModelRegistry } from "../../src/serving/model-registry.js";

// One tier vocabulary from the wire to the policy: the per-tier helpers every layer sums with.
describe("service tiers", () => {
  test("in scheduling order, under the wire's names: priority, default, flex, batch", () => {
    assert.deepEqual(SERVICE_TIERS, ["priority", "default", "flex", "batch"]);
    assert.deepEqual(TIER_RANK, { priority: 0, default: 1, flex: 2, batch: 3 });
    // /health lists the counts in this order.
    assert.deepEqual(Object.keys(perTier(() => 0)), ["priority", "default", "flex", "batch"]);
  });

  test("sums per tier over items, and totals over all tiers or some", () => {
    const shards: PerTier<number>[] = [
      { priority: 1, default: 2, flex: 3, batch: 4 },
      { priority: 10, default: 20, flex: 30, batch: 40 },
    ];
    const sum = sumPerTier(shards, (s) => s);
    assert.deepEqual(sum, { priority: 11, default: 22, flex: 33, batch: 44 });
    assert.equal(tierTotal(sum), 110);
    assert.equal(tierTotal(sum, ["priority", "flex"]), 44);
    assert.deepEqual(
      sumPerTier([], (s: PerTier<number>) => s),
      { priority: 0, default: 0, flex: 0, batch: 0 },
    );
  });

  test("batch lines get the sequences no other tier holds or waits for", () => {
    const stats = {
      slots: 16,
      running: { priority: 1, default: 2, flex: 3, batch: 5 },
      waiting: { priority: 1, default: 1, flex: 1, batch: 9 },
    };
    const registry = { get: () => ({ state: "ready", backend: { stats: () => stats } }) } as unknown as ModelRegistry;
    assert.equal(batchCapacity(registry)("m"), 16 - 6 - 3, "batch's own running and waiting lines do not count");
    stats.waiting.default = 20;
    assert.equal(batchCapacity(registry)("m"), 0);
  });
});
