import { FORMATS } from "./json-rules.js";
import { SCHEMA_LIMITS, SchemaError } from "./limits.js";

/**
 * The subset of JSON Schema that the grammar honours, and the checks on each keyword's value. A
 * schema using any other keyword is refused rather than silently loosened, so an output that follows
 * the grammar always validates against the schema the caller sent.
 */
export type Schema = Readonly<Record<string, unknown>>;

/** Keywords with no effect on the output, dropped. */
export const ANNOTATIONS = new Set([
  "title",
  "description",
  "default",
  "examples",
  "$schema",
  "$id",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
  "$defs",
  "definitions",
]);
export const TYPES = ["string", "number", "integer", "boolean", "null", "object", "array"] as const;
export type JsonType = (typeof TYPES)[number];

const COUNTS = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"] as const;
const OBJECT_KEYWORDS = ["properties", "required", "additionalProperties", "minProperties", "maxProperties"];
const ARRAY_KEYWORDS = ["items", "prefixItems", "minItems", "maxItems"];
const STRING_KEYWORDS = ["minLength", "maxLength", "format"];
/** Number keywords: integer ranges are exact in the grammar; the rest is checked after generation (output-check.ts). */
export const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"];
const COMBINERS = ["$ref", "anyOf", "oneOf", "allOf"];
const KNOWN = new Set([
  ...ANNOTATIONS,
  ...OBJECT_KEYWORDS,
  ...ARRAY_KEYWORDS,
  ...STRING_KEYWORDS,
  ...NUMBER_KEYWORDS,
  ...COMBINERS,
  "type",
  "enum",
  "const",
  "nullable",
]);

export function isPlainObject(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isLiteral(value: unknown): value is string | number | boolean | null {
  return value === null || typeof value === "string" || typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value));
}

const join = (path: string, key: string): string => (path === "" ? key : `${path}.${key}`);

/** Checks every keyword of one schema object (not its subschemas). */
export function checkKeywords(schema: Schema, path: string): void {
  for (const key of Object.keys(schema)) {
    if (!KNOWN.has(key)) throw new SchemaError(join(path, key), `the keyword '${key}' is not supported for constrained output.`);
  }
  for (const key of COUNTS) {
    const value = schema[key];
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || (value as number) < 0) throw new SchemaError(join(path, key), "must be a non-negative integer.");
    if ((value as number) > SCHEMA_LIMITS.count)
      throw new SchemaError(join(path, key), `${value} is above the largest supported count, ${SCHEMA_LIMITS.count}.`);
  }
  for (const [min, max] of [
    ["minLength", "maxLength"],
    ["minItems", "maxItems"],
    ["minProperties", "maxProperties"],
  ] as const) {
    if (schema[min] !== undefined && schema[max] !== undefined && (schema[min] as number) > (schema[max] as number)) {
      throw new SchemaError(join(path, min), `${min} (${schema[min]}) is greater than ${max} (${schema[max]}).`);
    }
  }
  const at = (key: string) => join(path, key);
  if ("nullable" in schema && typeof schema.nullable !== "boolean") throw new SchemaError(at("nullable"), "must be true or false.");
  if ("format" in schema && (typeof schema.format !== "string" || !FORMATS.has(schema.format))) {
    throw new SchemaError(at("format"), `only the formats ${[...FORMATS].join(", ")} are supported.`);
  }
  if ("required" in schema && !(Array.isArray(schema.required) && schema.required.every((name) => typeof name === "string"))) {
    throw new SchemaError(at("required"), "must be a list of property names.");
  }
  if ("properties" in schema && !isPlainObject(schema.properties)) throw new SchemaError(at("properties"), "must be an object.");
  if ("enum" in schema && !(Array.isArray(schema.enum) && schema.enum.length > 0 && schema.enum.every(isLiteral))) {
    throw new SchemaError(at("enum"), "must be a non-empty list of strings, numbers, booleans or null.");
  }
  if ("const" in schema && !isLiteral(schema.const)) throw new SchemaError(at("const"), "must be a string, number, boolean or null.");
  for (const key of ["prefixItems", "anyOf", "oneOf", "allOf"]) {
    if (key in schema && !(Array.isArray(schema[key]) && (schema[key] as unknown[]).length > 0))
      throw new SchemaError(at(key), "must be a non-empty list of schemas.");
  }
  for (const key of NUMBER_KEYWORDS) {
    if (key in schema && !(typeof schema[key] === "number" && Number.isFinite(schema[key])))
      throw new SchemaError(at(key), "must be a number.");
  }
  if ((schema.minimum as number) > (schema.maximum as number))
    throw new SchemaError(at("minimum"), `minimum (${schema.minimum}) is greater than maximum (${schema.maximum}).`);
  if ("multipleOf" in schema && !((schema.multipleOf as number) > 0)) throw new SchemaError(at("multipleOf"), "must be greater than 0.");
  if ("$ref" in schema && typeof schema.$ref !== "string") throw new SchemaError(at("$ref"), "must be a string.");
}

/**
 * The types a schema allows: its `type`, or the one its keywords imply (`properties`: object, ...);
 * null when nothing narrows it (any JSON value).
 */
export function typesOf(schema: Schema, path: string): JsonType[] | null {
  if ("type" in schema) {
    const list = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (list.length === 0 || !list.every((t) => TYPES.includes(t as JsonType)) || new Set(list).size !== list.length) {
      throw new SchemaError(join(path, "type"), `must be one of ${TYPES.join(", ")}, or a list of distinct ones.`);
    }
    return list as JsonType[];
  }
  const implied = new Set<JsonType>();
  for (const key of Object.keys(schema)) {
    if (OBJECT_KEYWORDS.includes(key)) implied.add("object");
    if (ARRAY_KEYWORDS.includes(key)) implied.add("array");
    if (STRING_KEYWORDS.includes(key)) implied.add("string");
    if (NUMBER_KEYWORDS.includes(key)) implied.add("number");
  }
  if (implied.size > 1) throw new SchemaError(path, `has keywords of several types (${[...implied].join(", ")}): say its 'type'.`);
  return implied.size === 1 ? [...implied] : null;
}

/** Whether a literal is of one of the types (an integral number is an integer). */
export function literalHasType(value: string | number | boolean | null, types: readonly JsonType[]): boolean {
  if (value === null) return types.includes("null");
  if (typeof value === "number") return types.includes("number") || (types.includes("integer") && Number.isInteger(value));
  return types.includes(typeof value as JsonType);
}

/** Keywords that a `$ref`, `allOf` or `anyOf`/`oneOf` may sit beside. */
export function onlyBeside(schema: Schema, keyword: string, path: string): void {
  for (const key of Object.keys(schema)) {
    if (key !== keyword && !ANNOTATIONS.has(key) && key !== "nullable") {
      throw new SchemaError(join(path, key), `'${keyword}' cannot be combined with '${key}'.`);
    }
  }
}
