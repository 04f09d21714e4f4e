import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { jsonSchemaToGbnf, needsOutputCheck, violation } from "../../src/engine/grammar/index.js";
import { parseGbnf, type ParsedGrammar } from "../helpers/gbnf-oracle.js";

/** Integer ranges in the grammar, run by llama.cpp's own matcher; number keywords checked after generation. */
const grammarOf = (schema: unknown): Promise<ParsedGrammar> => parseGbnf(jsonSchemaToGbnf(schema));

/** Every integer text in lo-span..hi+span is accepted exactly when it lies in lo..hi. */
function exactOver(grammar: ParsedGrammar, lo: bigint, hi: bigint, span = 30n): void {
  for (let n = lo - span; n <= hi + span; n++) {
    assert.equal(grammar.accepts(n.toString()), n >= lo && n <= hi, `${n} in ${lo}..${hi}`);
  }
}

describe("integer ranges are exact in the grammar", () => {
  test("zod v4's .int(): the safe-integer bounds, to the last digit", async () => {
    const grammar = await grammarOf({ type: "integer", minimum: -9007199254740991, maximum: 9007199254740991 });
    for (const ok of ["0", "7", "-7", "42", "9007199254740991", "-9007199254740991", "9007199254740990", "1000000000000000"])
      assert.ok(grammar.accepts(ok), ok);
    for (const bad of ["9007199254740992", "-9007199254740992", "9999999999999999", "10000000000000000", "-0", "01", "1.5", "1e3"])
      assert.ok(!grammar.accepts(bad), bad);
  });

  test("small ranges, across signs and digit counts, every value checked", async () => {
    const ranges: Array<[number, number]> = [
      [0, 0],
      [1, 9],
      [0, 100],
      [-5, 5],
      [-120, -7],
      [13, 987],
      [99, 101],
      [-1000, 1],
      [250, 255],
    ];
    for (const [lo, hi] of ranges) exactOver(await grammarOf({ type: "integer", minimum: lo, maximum: hi }), BigInt(lo), BigInt(hi));
  });

  test("exclusive and fractional bounds become the integers inside them; one open side", async () => {
    exactOver(await grammarOf({ type: "integer", exclusiveMinimum: 3, exclusiveMaximum: 17 }), 4n, 16n);
    exactOver(await grammarOf({ type: "integer", minimum: 2.5, maximum: 9.5 }), 3n, 9n);
    exactOver(await grammarOf({ type: "integer", minimum: -2, exclusiveMinimum: 0, maximum: 40, exclusiveMaximum: 12 }), 1n, 11n);
    const atLeast = await grammarOf({ type: "integer", minimum: 18 });
    for (let n = -30; n < 500; n++) assert.equal(atLeast.accepts(String(n)), n >= 18, String(n));
    assert.ok(atLeast.accepts("9999999999999999"));
    const below = await grammarOf({ type: "integer", exclusiveMaximum: 0 });
    for (let n = -500; n < 30; n++) assert.equal(below.accepts(String(n)), n < 0, String(n));
  });

  test("inside objects, nullable, and enum values out of range are left out", async () => {
    const grammar = await grammarOf({
      type: "object",
      properties: { age: { type: ["integer", "null"], minimum: 0, maximum: 150 } },
      required: ["age"],
      additionalProperties: false,
    });
    for (const ok of ['{"age":0}', '{"age":150}', '{"age":null}']) assert.ok(grammar.accepts(ok), ok);
    for (const bad of ['{"age":151}', '{"age":-1}']) assert.ok(!grammar.accepts(bad), bad);
    const listed = await grammarOf({ type: "integer", enum: [1, 5, 10, 20], maximum: 10 });
    assert.deepEqual(
      ["1", "5", "10", "20"].map((t) => listed.accepts(t)),
      [true, true, true, false],
    );
  });
});

describe("number keywords are checked after generation", () => {
  test("which schemas need the check", () => {
    assert.equal(needsOutputCheck({ type: "object", properties: { a: { type: "string" } } }), false);
    assert.equal(needsOutputCheck({ type: "object", properties: { a: { type: "array", items: { type: "number", maximum: 1 } } } }), true);
  });

  test("ranges and multipleOf in exact decimals", () => {
    const score = { type: "number", minimum: 0, maximum: 1 };
    assert.equal(violation(score, 0.5), null);
    assert.match(violation(score, 1.5)!, /above the maximum, 1/);
    assert.match(violation(score, -0.1)!, /below the minimum, 0/);
    assert.equal(violation({ type: "number", multipleOf: 0.1 }, 0.3), null);
    assert.match(violation({ type: "number", multipleOf: 0.1 }, 0.35)!, /not a multiple of 0.1/);
    assert.match(violation({ type: "number", exclusiveMinimum: 0 }, 0)!, /not above the exclusiveMinimum/);
    assert.match(violation({ type: "number", maximum: 1 }, JSON.parse("1e400"))!, /beyond the range of a double/);
  });

  test("the subschema each number was written under is found through $ref, anyOf, properties and items", () => {
    const schema = {
      $defs: { pct: { type: "number", minimum: 0, maximum: 100 } },
      type: "object",
      properties: {
        scores: { type: "array", items: { $ref: "#/$defs/pct" } },
        x: { anyOf: [{ type: "string" }, { type: "number", maximum: 3 }] },
      },
    };
    assert.equal(violation(schema, { scores: [1, 99.5], x: "big" }), null);
    assert.match(violation(schema, { scores: [1, 100.5] })!, /'scores\[1\]' \(100.5\) is above the maximum/);
    assert.match(violation(schema, { x: 4 })!, /'x'/);
    assert.equal(violation(schema, { x: 2 }), null);
  });
});
