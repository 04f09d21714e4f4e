import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { jsonObjectGbnf, jsonSchemaToGbnf, toolCallGbnf } from "../../src/engine/grammar/index.js";
import { JsonEnd } from "../../src/engine/json-end.js";
import { parseGbnf, type ParsedGrammar } from "../helpers/gbnf-oracle.js";

/** The grammars we build, run by llama.cpp's own parser and matcher. */
const schemaGrammar = (schema: unknown): Promise<ParsedGrammar> => parseGbnf(jsonSchemaToGbnf(schema));

function check(grammar: ParsedGrammar, accepted: string[], refused: string[]): void {
  for (const text of accepted) assert.ok(grammar.accepts(text), `accepts ${JSON.stringify(text)}`);
  for (const text of refused) assert.ok(!grammar.accepts(text), `refuses ${JSON.stringify(text)}`);
}

const person = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 12 },
    age: { type: "integer" },
    pet: { enum: ["cat", "dog"] },
    tags: { type: "array", items: { type: "string" }, maxItems: 2 },
  },
  required: ["name", "age"],
  additionalProperties: false,
};

describe("GBNF from JSON schemas, as llama.cpp runs it", () => {
  test("the text has a root rule and one rule per line", () => {
    const text = jsonSchemaToGbnf(person);
    assert.match(text, /^root ::= /);
    for (const line of text.trimEnd().split("\n")) assert.match(line, /^[a-z0-9-]+ ::= \S/);
  });

  test("JSON output is compact: at most one space after ':' and ',', none elsewhere, no newline", async () => {
    const grammar = await schemaGrammar(person);
    check(
      grammar,
      ['{"name":"Ann","age":30}', '{"name": "Ann", "age": 30, "pet": "cat"}', '{"name":"Ann","age":-3,"tags":["a", "b"]}'],
      [
        '{"name":  "Ann","age":30}',
        '{"name":"Ann",\n"age":30}',
        '{ "name":"Ann","age":30}',
        '{"name":"Ann" ,"age":30}',
        ' {"name":"Ann","age":30}',
        '{"name":"Ann","age":30} ',
        '{"name":"Ann","age":30}\n',
      ],
    );
  });

  test("required properties are always written, optional ones may be left out, in the declared order", async () => {
    const grammar = await schemaGrammar(person);
    check(
      grammar,
      ['{"name":"A","age":1,"tags":[]}', '{"name":"A","age":1,"pet":"dog","tags":["x"]}'],
      [
        '{"age":1}',
        '{"name":"A"}',
        '{"age":1,"name":"A"}',
        '{"name":"A","age":1,"other":1}',
        '{"name":"A","age":1,"tags":["x","y","z"]}',
        '{"name":"A","age":1.5}',
      ],
    );
    const allOptional = await schemaGrammar({
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "integer" }, c: { type: "integer" } },
    });
    check(
      allOptional,
      ["{}", '{"a":1}', '{"b":2}', '{"c":3}', '{"a":1,"c":3}', '{"b":2,"c":3}', '{"a":1,"b":2,"c":3}'],
      ['{"c":3,"a":1}', '{,"b":2}', '{"a":1,}'],
    );
    const middleRequired = await schemaGrammar({
      type: "object",
      properties: { a: { type: "null" }, b: { type: "null" }, c: { type: "null" } },
      required: ["b"],
    });
    check(middleRequired, ['{"b":null}', '{"a":null,"b":null}', '{"b":null,"c":null}'], ["{}", '{"a":null}', '{"a":null,"c":null}']);
  });

  test("strings count characters (an escape or an emoji is one), within minLength and maxLength", async () => {
    const grammar = await schemaGrammar({ type: "string", minLength: 2, maxLength: 3 });
    check(grammar, ['"ab"', '"abc"', '"\\n\\u00e9"', '"😀😀"', '"a\\"b"'], ['"a"', '"abcd"', '"a\nb"', '"\\x"']);
  });

  test("numbers, integers, booleans, null, nullable, type lists, enum, const, anyOf", async () => {
    check(await schemaGrammar({ type: "number" }), ["0", "-0.5", "12e3", "1.25E-7"], ["01", ".5", "1.", "+1", "NaN"]);
    check(await schemaGrammar({ type: "integer" }), ["0", "-42"], ["1.5", "1e3", "-"]);
    check(await schemaGrammar({ type: ["boolean", "null"] }), ["true", "false", "null"], ["1"]);
    check(await schemaGrammar({ type: "string", nullable: true, maxLength: 1 }), ['"a"', "null"], ['"ab"']);
    check(await schemaGrammar({ enum: ["a b", 2, null, true] }), ['"a b"', "2", "null", "true"], ['"a"', "false"]);
    check(await schemaGrammar({ type: "string", enum: ["x", 1] }), ['"x"'], ["1"]);
    check(await schemaGrammar({ const: 'q"uote' }), ['"q\\"uote"'], ['"q"uote"']);
    check(
      await schemaGrammar({ anyOf: [{ type: "integer" }, { type: "object", properties: { a: { const: 1 } }, required: ["a"] }] }),
      ["7", '{"a":1}'],
      ['{"a":2}', '"7"'],
    );
  });

  test("arrays: minItems, maxItems, prefixItems; maps: additionalProperties and property counts", async () => {
    check(
      await schemaGrammar({ type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 }),
      ["[1]", "[1, 2,3]"],
      ["[]", "[1,2,3,4]", "[1,]"],
    );
    check(
      await schemaGrammar({ type: "array", prefixItems: [{ type: "string" }, { type: "integer" }], items: false }),
      ['["a",1]'],
      ['["a"]', '["a",1,2]', '[1,"a"]'],
    );
    check(
      await schemaGrammar({ type: "array", prefixItems: [{ type: "string" }], items: { type: "integer" }, maxItems: 3 }),
      ['["a"]', '["a",1,2]'],
      ['["a",1,2,3]'],
    );
    check(
      await schemaGrammar({ type: "object", additionalProperties: { type: "integer" }, minProperties: 1, maxProperties: 2 }),
      ['{"x":1}', '{"x":1, "y":2}'],
      ["{}", '{"x":"1"}', '{"a":1,"b":2,"c":3}'],
    );
    check(await schemaGrammar({ type: "object" }), ["{}", '{"a":[1,{"b":null}]}'], ["[]"]);
    check(await schemaGrammar({ type: "object", properties: {} }), ["{}"], ['{"a":1}']);
    check(
      await schemaGrammar({ type: "object", properties: {}, additionalProperties: { type: "boolean" } }),
      ["{}", '{"a":true}'],
      ['{"a":1}'],
    );
    check(await schemaGrammar({ type: "string", enum: ["ab", "abcd"], maxLength: 3 }), ['"ab"'], ['"abcd"']);
  });

  test("formats: date, time, date-time, uuid", async () => {
    check(await schemaGrammar({ type: "string", format: "date" }), ['"2024-02-29"'], ['"2024-13-01"', '"24-01-01"']);
    check(await schemaGrammar({ type: "string", format: "time" }), ['"23:59:59Z"', '"08:00:00.5+02:00"'], ['"24:00:00Z"', '"08:00:00"']);
    check(await schemaGrammar({ format: "date-time" }), ['"2024-01-02T03:04:05Z"'], ['"2024-01-02 03:04:05Z"']);
    check(await schemaGrammar({ type: "string", format: "uuid" }), ['"123e4567-e89b-12d3-a456-426614174000"'], ['"123e4567"']);
  });

  test("$ref and $defs, recursion with a way out", async () => {
    const tree = {
      $defs: {
        node: {
          type: "object",
          properties: { v: { type: "integer" }, kids: { type: "array", items: { $ref: "#/$defs/node" } } },
          required: ["v"],
        },
      },
      $ref: "#/$defs/node",
    };
    check(await schemaGrammar(tree), ['{"v":1}', '{"v":1,"kids":[{"v":2,"kids":[]},{"v":3}]}'], ['{"v":1,"kids":[{}]}']);
    const list = { type: "object", properties: { next: { anyOf: [{ $ref: "#" }, { type: "null" }] } }, required: ["next"] };
    check(await schemaGrammar(list), ['{"next":null}', '{"next":{"next":null}}'], ["{}"]);
    check(await schemaGrammar({ definitions: { a: { allOf: [{ const: 1 }] } }, $ref: "#/definitions/a" }), ["1"], ["2"]);
  });

  test("a top-level scalar has no continuation once complete: no trailing space or newline", async () => {
    for (const [schema, value] of [
      [{ const: "x" }, '"x"'],
      [{ type: "string" }, '"hi"'],
      [{ type: "boolean" }, "true"],
      [{ enum: [1, 2] }, "2"],
      [{ type: "null" }, "null"],
    ] as const) {
      const grammar = await schemaGrammar(schema);
      check(grammar, [value], [`${value} `, `${value}\n`, `${value}"`, `${value}x`, ` ${value}`]);
    }
  });

  test("a forced tool call has no whitespace outside strings, and names one of the tools", async () => {
    const grammar = await parseGbnf(
      toolCallGbnf([
        {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" }, unit: { enum: ["c", "f"] } }, required: ["city"] },
        },
        { name: "get_time", parameters: {} },
      ]),
    );
    check(
      grammar,
      [
        '{"name":"get_weather","arguments":{"city":"New York","unit":"c"}}',
        '{"name":"get_weather","arguments":{"city":"Rome"}}',
        '{"name":"get_time","arguments":{"tz":"UTC"}}',
      ],
      [
        '{"name":"get_weather","arguments":{"city": "Rome"}}',
        '{"name": "get_weather","arguments":{"city":"Rome"}}',
        '{"name":"get_weather","arguments":{"city":"Rome"},"x":1}',
        '{"name":"other","arguments":{}}',
        '{"name":"get_time","arguments":[]}',
      ],
    );
  });

  test("json_object: any object, compact", async () => {
    check(await parseGbnf(jsonObjectGbnf()), ['{"a": [1, {"b": "c"}], "d": null}', "{}"], ["[1]", '"s"', '{"a":\n1}', "{} "]);
  });

  test("the largest counts allowed fit llama.cpp's own limits", async () => {
    const grammar = await schemaGrammar({
      type: "array",
      items: { type: "string", minLength: 2000, maxLength: 2000 },
      minItems: 0,
      maxItems: 2000,
    });
    check(grammar, ["[]", `["${"a".repeat(2000)}"]`], [`["${"a".repeat(1999)}"]`]);
  });
});

test("the JSON end tracker ends a top-level string, true, false or null as soon as it is complete", () => {
  const cases: Array<[string[], number]> = [
    [['"a', '}"'], 2],
    [['"\\"', '"'], 2],
    [["tr", "ue"], 2],
    [["n", "u", "ll"], 3],
    [["{", '"a":"}"', "}"], 3],
    [[" ", "[1,", "[2]", "]"], 4],
  ];
  for (const [pieces, endsAt] of cases) {
    const end = new JsonEnd();
    pieces.forEach((piece, i) => assert.equal(end.push(piece), i + 1 >= endsAt, `${JSON.stringify(pieces)} after ${i + 1}`));
  }
  const number = new JsonEnd();
  assert.equal(number.push("-12.5"), false, "a number is left to the grammar");
});
