import Big from "big.js";
import { isPlainObject, NUMBER_KEYWORDS, type Schema } from "./keywords.js";

/**
 * The number keywords a grammar cannot hold exactly (a `number`'s `minimum`, `maximum`,
 * `exclusiveMinimum`, `exclusiveMaximum`, and `multipleOf` on any number) are checked here, on the
 * generated value, after generation. Everything else the schema says was enforced by the grammar;
 * the walk below only follows the schema's structure (references, alternatives, properties, items)
 * far enough to find the subschema each number was generated under. Decimal arithmetic (big.js):
 * 0.3 is a multiple of 0.1.
 */

/** Whether the schema holds any number keyword anywhere, so that its output needs checking. */
export function needsOutputCheck(schema: unknown): boolean {
  const stack: unknown[] = [schema];
  let seen = 0;
  while (stack.length > 0 && seen++ < 100_000) {
    const node = stack.pop();
    if (typeof node !== "object" || node === null) continue;
    if (!Array.isArray(node) && NUMBER_KEYWORDS.some((key) => key in node)) return true;
    stack.push(...Object.values(node));
  }
  return false;
}

/** The schema's number keywords alone. */
export function numberKeywords(schema: Schema): Schema {
  return Object.fromEntries(NUMBER_KEYWORDS.filter((key) => key in schema).map((key) => [key, schema[key]]));
}

/**
 * The first way `value` breaks `schema` (as "'path': why"), or null. `root` resolves `$ref`s. A value
 * of another type than a subschema allows breaks it (so that `anyOf` finds the alternative that held).
 */
export function violation(schema: unknown, value: unknown, root: unknown = schema, path = "", depth = 0): string | null {
  if (schema === true || !isPlainObject(schema) || depth > 200) return null;
  if (schema.nullable === true && value === null) return null;
  if (typeof schema.$ref === "string") return violation(resolve(root, schema.$ref), value, root, path, depth + 1);
  if (Array.isArray(schema.allOf)) return firstOf(schema.allOf.map((sub) => () => violation(sub, value, root, path, depth + 1)));
  for (const key of ["anyOf", "oneOf"]) {
    const options = schema[key];
    if (!Array.isArray(options)) continue;
    const found = options.map((sub) => violation(sub, value, root, path, depth + 1));
    return found.includes(null) ? null : found[0]!;
  }
  const at = path === "" ? "the value" : `'${path}'`;
  if ("const" in schema && schema.const !== value) return `${at} is not the schema's const.`;
  if (Array.isArray(schema.enum) && !schema.enum.includes(value)) return `${at} is not one of the schema's enum values.`;
  if (!typeAllowed(schema.type, value)) return `${at} is not of type ${JSON.stringify(schema.type)}.`;
  if (typeof value === "number") return numberViolation(schema, value, at);
  if (Array.isArray(value)) return arrayViolation(schema, value, root, path, depth);
  if (isPlainObject(value)) return objectViolation(schema, value, root, path, depth);
  return null;
}

function numberViolation(schema: Schema, value: number, at: string): string | null {
  // An exponent past a double's range (1e400) parses as Infinity, which no bound or step admits.
  if (!Number.isFinite(value)) return NUMBER_KEYWORDS.some((key) => key in schema) ? `${at} is beyond the range of a double.` : null;
  const n = new Big(value);
  const bound = (key: string) => (typeof schema[key] === "number" ? new Big(schema[key] as number) : null);
  const [min, max, exclusiveMin, exclusiveMax, step] = NUMBER_KEYWORDS.map(bound);
  if (min && n.lt(min)) return `${at} (${value}) is below the minimum, ${schema.minimum}.`;
  if (max && n.gt(max)) return `${at} (${value}) is above the maximum, ${schema.maximum}.`;
  if (exclusiveMin && n.lte(exclusiveMin)) return `${at} (${value}) is not above the exclusiveMinimum, ${schema.exclusiveMinimum}.`;
  if (exclusiveMax && n.gte(exclusiveMax)) return `${at} (${value}) is not below the exclusiveMaximum, ${schema.exclusiveMaximum}.`;
  if (step && !n.mod(step).eq(0)) return `${at} (${value}) is not a multiple of ${schema.multipleOf}.`;
  return null;
}

function arrayViolation(schema: Schema, value: unknown[], root: unknown, path: string, depth: number): string | null {
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
  return firstOf(
    value.map((item, i) => () => violation(i < prefix.length ? prefix[i] : schema.items, item, root, `${path}[${i}]`, depth + 1)),
  );
}

function objectViolation(schema: Schema, value: Schema, root: unknown, path: string, depth: number): string | null {
  const properties = isPlainObject(schema.properties) ? schema.properties : {};
  return firstOf(
    Object.entries(value).map(([name, member]) => () => {
      const sub = Object.hasOwn(properties, name) ? properties[name] : schema.additionalProperties;
      return violation(sub, member, root, path === "" ? name : `${path}.${name}`, depth + 1);
    }),
  );
}

function typeAllowed(type: unknown, value: unknown): boolean {
  if (type === undefined) return true;
  const types = Array.isArray(type) ? type : [type];
  const actual = value === null ? "null" : Array.isArray(value) ? "array" : typeof value === "object" ? "object" : typeof value;
  return types.some((t) => t === actual || (t === "integer" && Number.isInteger(value)));
}

function resolve(root: unknown, ref: string): unknown {
  if (ref === "#") return root;
  const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
  const defs = match && isPlainObject(root) ? root[match[1]!] : undefined;
  const name = match?.[2]?.replace(/~1/g, "/").replace(/~0/g, "~");
  return isPlainObject(defs) && name !== undefined ? defs[name] : true;
}

function firstOf(checks: Array<() => string | null>): string | null {
  for (const check of checks) {
    const found = check();
    if (found) return found;
  }
  return null;
}
