import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { float32JsonCapacity, float32JsonText, writeFloat32Json } from "../../src/protocol/float32-json.js";

/** float32 values from a seeded walk over their bit patterns (every exponent, both signs). */
function float32s(count: number, seed: number): Float32Array {
  const bits = new Uint32Array(count);
  let state = seed;
  for (let i = 0; i < count; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    bits[i] = state;
  }
  return new Float32Array(bits.buffer);
}

describe("float32 vectors as JSON text", () => {
  test("every finite value reads back as exactly the float32 written, in at most nine significant digits", () => {
    const values = float32s(50_000, 7);
    const text = float32JsonText(values);
    const parsed = JSON.parse(text) as Array<number | null>;
    assert.equal(parsed.length, values.length);
    const misread = parsed.flatMap((value, i) => {
      const original = values[i]!;
      const expected = Number.isFinite(original) ? original : null;
      return (value === null ? value : Math.fround(value)) === expected ? [] : [`${original} written as ${value}`];
    });
    assert.deepEqual(misread, []);
    const long = text
      .slice(1, -1)
      .split(",")
      .filter((number) => number.replace(/^-/, "").replace(/e.*$/, "").replace(".", "").replace(/^0+/, "").length > 9);
    assert.deepEqual(long, []);
  });

  test("the values a unit vector holds, and the edges, as a reader expects them", () => {
    const cases: Array<[number, string]> = [
      [0, "0"],
      [-0, "0"],
      [1, "1"],
      [-1, "-1"],
      [0.5, "0.5"],
      [0.1, "0.100000001"],
      [-0.0123, "-0.0122999996"],
      [1e-6, "9.99999997e-7"],
      [0.000015, "0.0000149999996"],
      [123456789, "123456792"],
      [1e9, "1e+9"],
      [3.4e38, "3.39999995e+38"],
      [1.4e-45, "1.40129846e-45"],
      [Number.NaN, "null"],
      [Number.NEGATIVE_INFINITY, "null"],
    ];
    for (const [value, expected] of cases) assert.equal(float32JsonText(Float32Array.of(value)), `[${expected}]`, String(value));
  });

  test("a vector at its longest fits the capacity, written after what is already in the buffer", () => {
    const longest = new Float32Array(384).fill(-0.00000123456789);
    const out = new Uint8Array(3 + float32JsonCapacity(longest.length));
    out.set([0x61, 0x62, 0x63]);
    const end = writeFloat32Json(longest, out, 3);
    assert.ok(end <= out.length);
    const text = Buffer.from(out.subarray(0, end)).toString("latin1");
    assert.ok(text.startsWith("abc["));
    assert.deepEqual(
      (JSON.parse(text.slice(3)) as number[]).map((v) => Math.fround(v)),
      Array.from(longest),
    );
  });
});
