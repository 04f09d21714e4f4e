import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkSchemaDepth, jsonSchemaToGbnf, SCHEMA_LIMITS, SchemaError, toolCallGbnf } from "../../src/engine/grammar/index.js";
import { InvalidRequest } from "../../src/errors.js";
import { checkSchemas } from "../../src/serving/schema-check.js";

/** A schema nested `depth` times by `wrap`, built without recursion. */
function nested(depth: number, wrap: (inner: Record<string, unknown>) => Record<string, unknown>): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < depth; i++) schema = wrap(schema);
  return schema;
}
const inProperty = (inner: Record<string, unknown>) => ({ type: "object", properties: { a: inner }, required: ["a"] });
const inItems = (inner: Record<string, unknown>) => ({ type: "array", items: inner });
const inAnyOf = (inner: Record<string, unknown>) => ({ anyOf: [inner, { type: "null" }] });

function refused(schema: unknown, path: string | RegExp, detail: RegExp): void {
  assert.throws(
    () => jsonSchemaToGbnf(schema),
    (error: unknown) => {
      assert.ok(error instanceof SchemaError, `a SchemaError, not ${String(error)}`);
      if (typeof path === "string") assert.equal(error.path, path);
      else assert.match(error.path, path);
      assert.match(error.detail, detail);
      return true;
    },
  );
}

describe("schemas the grammar refuses, each naming where and why", () => {
  test("a $ref to itself, directly, through the root, or through a cycle with no way out", () => {
    refused({ $ref: "#/$defs/a", $defs: { a: { $ref: "#/$defs/a" } } }, "$defs.a", /refers to itself/);
    refused({ $ref: "#" }, "", /refers to itself/);
    refused(
      { $ref: "#/$defs/a", $defs: { a: { anyOf: [{ $ref: "#/$defs/b" }, { type: "string" }] }, b: { $ref: "#/$defs/a" } } },
      /^\$defs\.[ab]$/,
      /refers to itself/,
    );
    const noWayOut = {
      $defs: {
        a: { type: "object", properties: { b: { $ref: "#/$defs/b" } }, required: ["b"] },
        b: { type: "array", items: { $ref: "#/$defs/a" }, minItems: 1 },
      },
      type: "object",
      properties: { start: { $ref: "#/$defs/a" } },
    };
    refused(noWayOut, /^\$defs\.[ab]$/, /can never be finished/);
    refused({ type: "object", properties: { self: { $ref: "#" } }, required: ["self"] }, "", /can never be finished/);
  });

  test("a dangling or unsupported $ref", () => {
    refused({ type: "object", properties: { x: { $ref: "#/$defs/missing" } } }, "properties.x.$ref", /refers to no definition/);
    refused({ $ref: "#/definitions/x", $defs: { x: { type: "string" } } }, "$ref", /refers to no definition/);
    refused({ $ref: "https://example.com/s.json" }, "$ref", /only references of the form/);
  });

  test("counts above the cap, and minimums above maximums", () => {
    refused({ type: "string", minLength: 10_000_000 }, "minLength", /above the largest supported count, 2000/);
    refused({ type: "array", maxItems: 1_000_000 }, "maxItems", /above the largest supported count/);
    refused({ type: "array", minItems: 3, maxItems: 2 }, "minItems", /greater than maxItems/);
    refused({ type: "string", minLength: 5, maxLength: 4 }, "minLength", /greater than maxLength/);
    refused({ type: "object", minProperties: 2, maxProperties: 1 }, "minProperties", /greater than/);
    refused({ type: "string", maxLength: -1 }, "maxLength", /non-negative integer/);
    refused({ type: "array", items: false, minItems: 1 }, "minItems", /cannot be met/);
    const manyLongStrings = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`p${i}`, { type: "string", maxLength: 2000 }]));
    refused({ type: "object", properties: manyLongStrings }, /^properties\.p10$/, /add up to more than 20000/);
  });

  test("nesting past the depth limit, however deep, never overflows the stack", () => {
    for (const depth of [1_000, 3_000, 100_000]) {
      refused(nested(depth, inProperty), /^(properties\.a\.)+/, /nested more than 64 levels/);
      refused(nested(depth, inItems), /^items(\.items)+$/, /nested more than 64 levels/);
      refused(nested(depth, inAnyOf), /^anyOf\[0\]/, /nested more than 64 levels/);
    }
    assert.doesNotThrow(() => jsonSchemaToGbnf(nested(SCHEMA_LIMITS.depth / 2, inProperty)));
  });

  test("too many subschemas or enum values", () => {
    const wide = Object.fromEntries(Array.from({ length: SCHEMA_LIMITS.nodes + 1 }, (_, i) => [`p${i}`, { type: "integer" }]));
    refused({ type: "object", properties: wide }, /^properties\.p\d+$/, new RegExp(`more than ${SCHEMA_LIMITS.nodes} subschemas`));
    refused({ enum: Array.from({ length: 1001 }, (_, i) => i) }, "enum", /more than 1000 enum values/);
    refused({ const: "x".repeat(SCHEMA_LIMITS.literalChars + 1) }, "const", /longer than 100000 characters/);
  });

  test("keywords the grammar cannot honour, and malformed ones", () => {
    refused({ type: "object", properties: { n: { type: "number", minimum: "1" } } }, "properties.n.minimum", /must be a number/);
    refused({ type: "number", minimum: 2, maximum: 1 }, "minimum", /greater than maximum/);
    refused({ type: "integer", minimum: 1.2, maximum: 1.8 }, "", /no integer lies between/);
    refused({ type: "number", multipleOf: 0 }, "multipleOf", /greater than 0/);
    refused({ type: "string", pattern: "^a" }, "pattern", /not supported/);
    refused({ allOf: [{ type: "string" }, { maxLength: 2 }] }, "allOf", /single-schema allOf/);
    refused({ anyOf: [{ type: "string" }], type: "string" }, "type", /cannot be combined/);
    refused({ type: "object", properties: { a: { type: "string" } }, required: ["b"] }, "required", /'b' is not one of the properties/);
    refused({ type: "strin" }, "type", /must be one of/);
    refused({ type: "string", format: "email" }, "format", /only the formats/);
    refused({ properties: {}, items: {} }, "", /say its 'type'/);
    refused({ type: "string", enum: [1, 2] }, "enum", /no value is of the schema's type/);
    refused({ type: "string", enum: ["long", "longer"], maxLength: 3 }, "enum", /no value is of the schema's type and length/);
    refused({ type: "object", required: ["a"] }, "required", /'a' is not one of the properties/);
    refused({ type: "object", properties: { a: false } }, "properties.a", /allows no value/);
  });

  test("a tool call names the tool whose parameters are at fault", () => {
    const ok = { name: "ok", parameters: { type: "object", properties: {} } };
    for (const parameters of [
      nested(3_000, inProperty),
      { type: "object", properties: { x: { $ref: "#/$defs/nope" } } },
      { type: "string" },
    ]) {
      assert.throws(
        () => toolCallGbnf([ok, { name: "bad", parameters }]),
        (error: unknown) => error instanceof SchemaError && error.tool === 1,
      );
    }
  });

  test("the depth check of unbound tool parameters is iterative and bounded", () => {
    for (const depth of [3_000, 100_000]) assert.throws(() => checkSchemaDepth(nested(depth, inProperty)), SchemaError);
    assert.doesNotThrow(() => checkSchemaDepth(nested(20, inProperty)));
  });
});

describe("the serving layer's check: a 400 naming the parameter", () => {
  const tool = (name: string, parameters: Record<string, unknown>) => ({ name, parameters });
  function param(check: () => void): string | null {
    try {
      check();
    } catch (error) {
      assert.ok(error instanceof InvalidRequest);
      assert.equal(error.status, 400);
      assert.equal(error.code, "invalid_schema");
      return error.param;
    }
    return null;
  }

  test("response_format, forced tools and unbound tools each get their own param", () => {
    const deep = nested(3_000, inProperty);
    const bad = { type: "string", minLength: 10_000_000 };
    assert.equal(
      param(() => checkSchemas({ responseFormat: { type: "json_schema", schema: bad } }, [])),
      "response_format.json_schema.schema",
    );
    const tools = [tool("a", { type: "object", properties: {} }), tool("b", bad), tool("c", deep)];
    // Forced to b: its parameters are compiled; c is only checked for depth; a is fine.
    assert.equal(
      param(() => checkSchemas({ tools }, [tools[1]!])),
      "tools[2].function.parameters",
    );
    assert.equal(
      param(() => checkSchemas({ tools: tools.slice(0, 2) }, [tools[1]!])),
      "tools[1].function.parameters",
    );
    // Under auto, b's unsupported count is not compiled (the grammar never binds it), only bounded.
    assert.equal(
      param(() => checkSchemas({ tools: tools.slice(0, 2) }, [])),
      null,
    );
    assert.equal(
      param(() => checkSchemas({ tools, responseFormat: { type: "json_object" } }, [])),
      "tools[2].function.parameters",
    );
  });
});
