import { alt, EMPTY, type Expr, type Grammar, lit, opt, ref, rep, seq } from "./gbnf.js";
import type { JsonRules } from "./json-rules.js";
import { isPlainObject, type Schema } from "./keywords.js";
import { SchemaError } from "./limits.js";

/** What the object and array shapes need from the schema walk. */
export interface Shapes {
  readonly grammar: Grammar;
  readonly json: JsonRules;
  fresh(base: string): string;
  count(value: number, path: string): void;
  literal(value: string, path: string): Expr;
  value(schema: unknown, path: string, depth: number): Expr;
}

const join = (path: string, key: string): string => (path === "" ? key : `${path}.${key}`);

/**
 * An object: its declared properties in their declared order, the optional ones possibly left out;
 * or, with no `properties`, a map of string keys to `additionalProperties` values. Extra keys
 * beside declared properties are never written (the output is still valid).
 */
export function objectOf(w: Shapes, schema: Schema, path: string, depth: number): Expr {
  const extra = schema.additionalProperties;
  // `properties: {}` beside an additionalProperties schema still describes a map.
  const declared = isPlainObject(schema.properties) && !(Object.keys(schema.properties).length === 0 && isPlainObject(extra));
  if (declared) return declaredObject(w, schema, path, depth);
  const required = (schema.required as string[] | undefined) ?? [];
  if (required.length > 0) throw new SchemaError(join(path, "required"), `'${required[0]!.slice(0, 80)}' is not one of the properties.`);
  const min = (schema.minProperties as number | undefined) ?? 0;
  const max = extra === false ? 0 : ((schema.maxProperties as number | undefined) ?? null);
  if (min > (max ?? min))
    throw new SchemaError(join(path, "minProperties"), "cannot be met: additionalProperties is false and there are no properties.");
  if (max === 0) return lit("{}");
  const anyValue = extra === undefined || extra === true;
  if (anyValue && min === 0 && max === null) return w.json.object();
  const value = anyValue ? w.json.value() : w.value(extra, join(path, "additionalProperties"), depth + 1);
  w.count(max ?? min, path);
  return list(w, "{", "}", seq(w.json.string(), w.json.colon(), value), min, max, "member");
}

function declaredObject(w: Shapes, schema: Schema, path: string, depth: number): Expr {
  const properties = Object.entries(schema.properties as Schema);
  const required = new Set((schema.required as string[] | undefined) ?? []);
  for (const name of required) {
    if (!Object.hasOwn(schema.properties as Schema, name))
      throw new SchemaError(join(path, "required"), `'${name.slice(0, 80)}' is not one of the properties.`);
  }
  // With a bound on the number of properties, every declared one is written, so the count is known.
  const bounded = schema.minProperties !== undefined || schema.maxProperties !== undefined;
  if (bounded) {
    const min = (schema.minProperties as number | undefined) ?? 0;
    const max = (schema.maxProperties as number | undefined) ?? Infinity;
    if (properties.length < min || properties.length > max) {
      throw new SchemaError(
        path,
        `minProperties and maxProperties are supported only when the ${properties.length} declared properties fall within them.`,
      );
    }
  }
  const members = properties.map(([name, sub]) => {
    const at = join(join(path, "properties"), name);
    return { name, required: bounded || required.has(name), body: seq(w.literal(name, at), w.json.colon(), w.value(sub, at, depth + 2)) };
  });
  if (members.every((m) => m.required)) {
    return seq(lit("{"), ...members.flatMap((m, i) => (i === 0 ? [m.body] : [w.json.comma(), m.body])), lit("}"));
  }
  // Each member may be the first one written (no comma before it) or a later one, so each gets a
  // rule; what may follow member i (the tail) is a chain of rules shared by every way to start.
  const rules = members.map((m) => ({ ...m, rule: w.grammar.define(w.fresh(`prop-${m.name}`), m.body) }));
  const tails = rules.map((m) => {
    const next = seq(w.json.comma(), ref(m.rule));
    return m.required ? next : opt(ref(w.grammar.define(w.fresh(`prop-${m.name}-next`), next)));
  });
  const firstRequired = rules.findIndex((m) => m.required);
  const lastStart = firstRequired === -1 ? rules.length - 1 : firstRequired;
  const rest: Expr[] = new Array<Expr>(rules.length + 1).fill(EMPTY);
  if (lastStart + 1 < rules.length) rest[lastStart + 1] = ref(w.grammar.define(w.fresh("props-rest"), seq(...tails.slice(lastStart + 1))));
  for (let i = lastStart; i >= 1; i--) rest[i] = ref(w.grammar.define(w.fresh("props-rest"), seq(tails[i]!, rest[i + 1]!)));
  const starts = rules.slice(0, lastStart + 1).map((m, i) => seq(ref(m.rule), rest[i + 1]!));
  return seq(lit("{"), alt(...starts, ...(firstRequired === -1 ? [EMPTY] : [])), lit("}"));
}

/** An array: `items` repeated within minItems..maxItems, after the `prefixItems` if any. */
export function arrayOf(w: Shapes, schema: Schema, path: string, depth: number): Expr {
  const min = (schema.minItems as number | undefined) ?? 0;
  const max = (schema.maxItems as number | undefined) ?? null;
  const items = schema.items;
  const itemsAt = join(path, "items");
  if (Array.isArray(items)) throw new SchemaError(itemsAt, "a list of item schemas is written as prefixItems.");
  const item = (): Expr => (items === undefined || items === true ? w.json.value() : w.value(items, itemsAt, depth + 1));
  const prefix = (schema.prefixItems as unknown[] | undefined) ?? [];
  if (prefix.length === 0) {
    if (items === false && min > 0) throw new SchemaError(join(path, "minItems"), "cannot be met: items is false.");
    if (items === false || max === 0) return lit("[]");
    if (min === 0 && max === null && (items === undefined || items === true)) return w.json.array();
    w.count(max ?? min, path);
    return list(w, "[", "]", item(), min, max, "item");
  }
  // The prefix items are all written (as many as maxItems allows), then extra items if needed or allowed.
  const taken = max === null ? prefix.length : Math.min(prefix.length, max);
  const extraMin = Math.max(0, min - taken);
  const extraMax = items === false ? 0 : items === undefined ? extraMin : max === null ? null : max - taken;
  if (extraMax !== null && extraMin > extraMax)
    throw new SchemaError(join(path, "minItems"), "cannot be met with prefixItems when items is false.");
  if (taken === 0) return lit("[]");
  w.count(taken + (extraMax ?? extraMin), path);
  const parts = prefix.slice(0, taken).map((sub, i) => w.value(sub, `${join(path, "prefixItems")}[${i}]`, depth + 2));
  let body = seq(...parts.flatMap((part, i) => (i === 0 ? [part] : [w.json.comma(), part])));
  if (extraMax !== 0) {
    const one = w.grammar.define(w.fresh("item"), item());
    const next = w.grammar.define(w.fresh("item-next"), seq(w.json.comma(), ref(one)));
    body = seq(body, rep(ref(next), extraMin, extraMax));
  }
  return seq(lit("["), body, lit("]"));
}

/** `open item (, item){min-1,max-1} close`, or empty when min is 0. */
function list(w: Shapes, open: string, close: string, item: Expr, min: number, max: number | null, base: string): Expr {
  const one = w.grammar.define(w.fresh(base), item);
  const next = w.grammar.define(w.fresh(`${base}-next`), seq(w.json.comma(), ref(one)));
  const items = seq(ref(one), rep(ref(next), Math.max(0, min - 1), max === null ? null : max - 1));
  if (min > 0) return seq(lit(open), items, lit(close));
  return seq(lit(open), opt(ref(w.grammar.define(w.fresh(`${base}-list`), items))), lit(close));
}
