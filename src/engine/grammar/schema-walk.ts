import { alt, type Expr, type Grammar, lit, ref, rep, seq } from "./gbnf.js";
import type { Format, JsonRules } from "./json-rules.js";
import { checkKeywords, isLiteral, isPlainObject, literalHasType, onlyBeside, type JsonType, type Schema, typesOf } from "./keywords.js";
import { integerBounds, integerRange } from "./integer-range.js";
import { SCHEMA_LIMITS, SchemaError, type Budget } from "./limits.js";
import { numberKeywords, violation } from "./output-check.js";
import { arrayOf, objectOf, type Shapes } from "./shapes.js";

const join = (path: string, key: string): string => (path === "" ? key : `${path}.${key}`);
const REF = /^#\/(\$defs|definitions)\/([^/]+)$/;

interface Pending {
  rule: string;
  schema: unknown;
  path: string;
  depth: number;
}

/**
 * Compiles one JSON schema into rules of a grammar. Each subschema's expression is used exactly
 * once (a part used twice gets its own rule), so the grammar grows linearly with the schema. The
 * walk into subschemas is depth-checked, and `$ref` targets are compiled from a queue rather than
 * by recursion, so no schema can overflow the stack.
 */
export class SchemaWalk implements Shapes {
  private readonly defs = new Map<string, string>();
  private readonly queue: Pending[] = [];
  /** Rule → where its definition is in the schema, to name a definition in an error. */
  readonly origins = new Map<string, string>();

  constructor(
    readonly grammar: Grammar,
    readonly json: JsonRules,
    private readonly budget: Budget,
    private readonly root: unknown,
    /** Keeps the rule names of several schemas in one grammar apart. */
    private readonly prefix: string,
    /** The type of a root that says none (tool arguments are always an object). */
    private readonly rootType?: JsonType,
  ) {}

  /** Compiles the whole schema; returns the rule of its root value. */
  compile(): string {
    const rule = this.grammar.fresh(`${this.prefix}schema`);
    this.queue.push({ rule, schema: this.root, path: "", depth: 0 });
    this.defs.set("#", rule);
    // The queue grows while it is read: each definition is compiled once, in the order first referred to.
    for (let i = 0; i < this.queue.length; i++) {
      const next = this.queue[i]!;
      this.origins.set(next.rule, next.path);
      this.grammar.define(next.rule, this.value(next.schema, next.path, next.depth));
    }
    return rule;
  }

  fresh(base: string): string {
    return this.grammar.fresh(`${this.prefix}${base}`);
  }

  count(value: number, path: string): void {
    this.budget.count(value, path);
  }

  /** A JSON value's text, exactly as JSON.stringify writes it. */
  literal(value: string | number | boolean | null, path: string): Expr {
    const text = JSON.stringify(value);
    this.budget.literal(text, path);
    return lit(text);
  }

  value(schema: unknown, path: string, depth: number): Expr {
    if (depth > SCHEMA_LIMITS.depth) throw new SchemaError(path, `the schema is nested more than ${SCHEMA_LIMITS.depth} levels deep.`);
    this.budget.node(path);
    if (schema === true) return this.json.value();
    if (schema === false) throw new SchemaError(path, "the schema `false` allows no value.");
    if (!isPlainObject(schema)) throw new SchemaError(path, "must be a schema (a JSON object).");
    checkKeywords(schema, path);
    const shape = this.shape(schema, path, depth);
    return schema.nullable === true ? alt(shape, lit("null")) : shape;
  }

  private shape(schema: Schema, path: string, depth: number): Expr {
    if ("$ref" in schema) {
      onlyBeside(schema, "$ref", path);
      return this.reference(schema.$ref as string, join(path, "$ref"));
    }
    if ("allOf" in schema) {
      onlyBeside(schema, "allOf", path);
      const parts = schema.allOf as unknown[];
      if (parts.length > 1) throw new SchemaError(join(path, "allOf"), "only a single-schema allOf is supported.");
      return this.value(parts[0], `${join(path, "allOf")}[0]`, depth + 2);
    }
    for (const keyword of ["anyOf", "oneOf"]) {
      if (!(keyword in schema)) continue;
      onlyBeside(schema, keyword, path);
      // oneOf is held to anyOf: the grammar cannot make the alternatives exclusive.
      return alt(...(schema[keyword] as unknown[]).map((sub, i) => this.value(sub, `${join(path, keyword)}[${i}]`, depth + 2)));
    }
    const types = typesOf(schema, path) ?? (path === "" && this.rootType ? [this.rootType] : null);
    if ("const" in schema || "enum" in schema) return this.literals(schema, types, path);
    if (types === null) return this.json.value();
    return alt(...types.map((type) => this.typed(type, schema, path, depth)));
  }

  private typed(type: JsonType, schema: Schema, path: string, depth: number): Expr {
    switch (type) {
      case "string":
        return this.string(schema, path);
      case "number":
        return this.json.number();
      case "integer": {
        const bounds = integerBounds(schema, path);
        return bounds ? integerRange(bounds.low, bounds.high) : this.json.integer();
      }
      case "boolean":
        return this.json.boolean();
      case "null":
        return lit("null");
      case "object":
        return objectOf(this, schema, path, depth);
      case "array":
        return arrayOf(this, schema, path, depth);
    }
  }

  private string(schema: Schema, path: string): Expr {
    const min = (schema.minLength as number | undefined) ?? 0;
    const max = (schema.maxLength as number | undefined) ?? null;
    if (schema.format !== undefined) {
      if (schema.minLength !== undefined || schema.maxLength !== undefined)
        throw new SchemaError(join(path, "format"), "cannot be combined with minLength or maxLength.");
      return this.json.formatted(schema.format as Format);
    }
    if (min === 0 && max === null) return this.json.string();
    this.count(max ?? min, path);
    return seq(lit('"'), rep(this.json.char(), min, max), lit('"'));
  }

  /** `const` or `enum`: the values' JSON texts, those of the allowed types only. */
  private literals(schema: Schema, types: JsonType[] | null, path: string): Expr {
    const where = join(path, "const" in schema ? "const" : "enum");
    let values = "const" in schema ? [schema.const] : (schema.enum as unknown[]);
    if ("const" in schema && "enum" in schema && !(schema.enum as unknown[]).some((v) => v === schema.const)) {
      throw new SchemaError(where, "the const value is not in the enum.");
    }
    const min = (schema.minLength as number | undefined) ?? 0;
    const max = (schema.maxLength as number | undefined) ?? Infinity;
    // A number outside the schema's range or not a multiple of its multipleOf is left out, as a string of the wrong length is.
    const fits = (v: unknown) =>
      (typeof v !== "string" || ([...v].length >= min && [...v].length <= max)) &&
      (typeof v !== "number" || violation(numberKeywords(schema), v) === null);
    values = values.filter((v) => isLiteral(v) && (types === null || literalHasType(v, types)) && fits(v));
    if (values.length === 0) throw new SchemaError(where, "no value is of the schema's type and length.");
    this.budget.enumValues(values.length, where);
    const unique = new Map(values.map((v) => [JSON.stringify(v), v as string | number | boolean | null]));
    return alt(...[...unique.values()].map((v) => this.literal(v, where)));
  }

  /** A `$ref` to a definition of this schema: its rule, compiled later from the queue. */
  private reference(target: string, path: string): Expr {
    if (target === "#") return ref(this.defs.get("#")!);
    const match = REF.exec(target);
    if (!match) throw new SchemaError(path, `only references of the form '#/$defs/NAME' are supported, not '${target.slice(0, 80)}'.`);
    const [, container, escaped] = match as unknown as [string, string, string];
    const name = escaped.replace(/~1/g, "/").replace(/~0/g, "~");
    const defs = isPlainObject(this.root) ? this.root[container] : undefined;
    if (!isPlainObject(defs) || !Object.hasOwn(defs, name))
      throw new SchemaError(path, `'${target.slice(0, 80)}' refers to no definition in the schema's ${container}.`);
    let rule = this.defs.get(target);
    if (!rule) {
      rule = this.fresh(`def-${name}`);
      this.defs.set(target, rule);
      this.queue.push({ rule, schema: defs[name], path: `${container}.${name}`, depth: 2 });
    }
    return ref(rule);
  }
}
