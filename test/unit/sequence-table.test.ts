import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { copyMinTokens, SequenceTable } from "../../src/engine/core/sequences.js";
import type { MemoryOp } from "../../src/engine/runner/step-protocol.js";

const tokens = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

describe("where a request runs among a shard's sequences", () => {
  test("next to a running sequence: llama.cpp runs consecutive ids in one pass over the weights", () => {
    const table = new SequenceTable(4, 4096, true);
    const ops: MemoryOp[] = [];
    const ids = [0, 1, 2].map((i) => table.take(`n${i}`, tokens(i * 100, 10), ops).sequence);
    assert.deepEqual(ids, [0, 1, 2]);
    table.give(0, undefined, ops);
    table.give(1, undefined, ops);
    // 2 runs; 0 (empty, first) would leave a gap between it and 2, 3 and 1 would not.
    const next = table.take("n9", tokens(900, 10), ops).sequence;
    assert.ok(next === 1 || next === 3, `took ${next}`);
  });

  test("a long cached prefix comes along by a copy into a sequence next to a running one; no other cache is thrown away for it", () => {
    const table = new SequenceTable(6, 4096, true);
    const ops: MemoryOp[] = [];
    const document = tokens(1000, 300);
    for (let i = 0; i < 5; i++) table.take(`n${i}`, tokens(i * 100, 10), ops);
    assert.equal(table.take("a", document, ops).sequence, 5);
    for (const id of [1, 2, 3, 4]) table.give(id, undefined, ops);
    table.give(5, document, ops);
    ops.length = 0;
    const taken = table.take("a", [...document, 7], ops);
    assert.deepEqual(taken, { sequence: 1, reused: 300 });
    assert.deepEqual(ops, [
      { op: "cp", src: 5, dst: 1 },
      { op: "rm", seq: 1, from: 300 },
    ]);
    // The cache stays where it was for the namespace's next request.
    assert.equal(table.bestPrefix("a", document), 300);
    // A shared prefix under the copy's worth (16 tokens at 4,096 cells) runs where it is cached, gap
    // or not, and is billed for its cached tokens; one of 100 tokens comes along by a copy.
    assert.equal(copyMinTokens(4096), 16);
    for (const [shared, expected] of [
      [12, { sequence: 2, reused: 12 }],
      [100, { sequence: 1, reused: 100 }],
    ] as const) {
      const short = new SequenceTable(4, 4096, true);
      short.take("x", tokens(0, 10), ops);
      short.take("y", tokens(50, 10), ops);
      short.take("a", document.slice(0, shared), ops);
      short.give(1, undefined, ops);
      short.give(2, document.slice(0, shared), ops);
      assert.deepEqual(short.take("a", [...document.slice(0, shared), 7], ops), expected, `${shared} shared tokens`);
    }
    // With no empty sequence next to a running one, a prefix hit runs where it is.
    const crowded = new SequenceTable(3, 4096, true);
    crowded.take("a", document, ops);
    crowded.take("b", tokens(0, 10), ops);
    crowded.give(0, document, ops);
    crowded.take("c", tokens(50, 10), ops);
    crowded.give(2, tokens(50, 10), ops);
    // 0 holds a's document, 1 runs, 2 holds c's prompt: a runs in 0 (no gap) and 2 keeps c's cache.
    assert.deepEqual(crowded.take("a", [...document, 7], ops), { sequence: 0, reused: 300 });
    assert.equal(crowded.bestPrefix("c", tokens(50, 10)), 10);
  });
});

describe("the prefix cache keeps what the next requests will ask for (issue 56)", () => {
  const system = tokens(5000, 30);
  const prompt = (i: number) => [...system, ...tokens(10_000 + i * 1000, 100)];
  const answer = (i: number, pass: number) => tokens(500_000 + i * 1000 + pass * 100, 64);

  test("16 clients resending 16 cached prompts each find their whole prompt where it is, with no copy and no cache lost", () => {
    const table = new SequenceTable(16, 512, true);
    const ops: MemoryOp[] = [];
    const where = new Map<number, number>();
    for (let i = 0; i < 16; i++) where.set(i, table.take("a", prompt(i), ops).sequence);
    for (let pass = 1; pass <= 3; pass++) {
      // Each sequence holds its prompt and the answer it generated.
      for (let i = 0; i < 16; i++) table.give(where.get(i)!, [...prompt(i), ...answer(i, pass)], ops, prompt(i).length);
      ops.length = 0;
      // All 16 again at once, in another order each pass.
      const order = Array.from({ length: 16 }, (_, i) => (i * (pass * 4 + 1)) % 16);
      for (const i of order) {
        const taken = table.take("a", prompt(i), ops);
        assert.deepEqual(taken, { sequence: where.get(i), reused: prompt(i).length - 1 }, `pass ${pass}, prompt ${i}`);
      }
      assert.equal(
        ops.filter((op) => op.op === "cp").length,
        0,
        `pass ${pass}: no copy (${JSON.stringify(ops.filter((op) => op.op === "cp"))})`,
      );
    }
  });

  test("a repeat arriving alone, while every other sequence holds a cached prompt, runs in its own cache", () => {
    const table = new SequenceTable(4, 512, true);
    const ops: MemoryOp[] = [];
    for (let i = 0; i < 4; i++) table.take("a", prompt(i), ops);
    for (let i = 0; i < 4; i++) table.give(i, [...prompt(i), ...answer(i, 0)], ops, prompt(i).length);
    ops.length = 0;
    assert.deepEqual(table.take("a", prompt(2), ops), { sequence: 2, reused: prompt(2).length - 1 });
    assert.ok(!ops.some((op) => op.op === "cp"));
    for (const i of [0, 1, 3]) assert.equal(table.bestPrefix("a", prompt(i)), prompt(i).length, `prompt ${i} still cached`);
  });

  test("another document after the same system prompt copies the shared start and leaves the cached document whole", () => {
    const table = new SequenceTable(4, 512, true);
    const ops: MemoryOp[] = [];
    const first = table.take("a", prompt(0), ops).sequence;
    table.give(first, [...prompt(0), ...answer(0, 0)], ops, prompt(0).length);
    ops.length = 0;
    const taken = table.take("a", prompt(1), ops);
    assert.notEqual(taken.sequence, first);
    assert.equal(taken.reused, system.length);
    assert.deepEqual(ops, [
      { op: "cp", src: first, dst: taken.sequence },
      { op: "rm", seq: taken.sequence, from: system.length },
    ]);
    // The first document is still cached whole, answer included, for its conversation's next turn.
    assert.equal(table.bestPrefix("a", [...prompt(0), ...answer(0, 0), 7]), prompt(0).length + 64);
    table.give(taken.sequence, [...prompt(1), ...answer(1, 0)], ops, prompt(1).length);
    // Back to the first document: found whole where it was.
    assert.deepEqual(table.take("a", prompt(0), ops), { sequence: first, reused: prompt(0).length - 1 });
  });
});
