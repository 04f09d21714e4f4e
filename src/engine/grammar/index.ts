import type { OutputConstraint, ToolDefinition } from "../types.js";
import { findDefects } from "./analysis.js";
import { alt, type Expr, Grammar, lit, ref, seq } from "./gbnf.js";
import { JsonRules, type Whitespace } from "./json-rules.js";
import { Budget, SCHEMA_LIMITS, SchemaError } from "./limits.js";
import { SchemaWalk } from "./schema-walk.js";

/**
 * Output constraints as GBNF text for llama.cpp (`llama_sampler_init_grammar(vocab, text, "root")`).
 * Pure functions: a schema the grammar cannot express, or one out of SCHEMA_LIMITS, throws a
 * SchemaError saying where in the schema and why; callers turn it into a 400 naming the parameter.
 */
export { SCHEMA_LIMITS, SchemaError } from "./limits.js";
export type { Whitespace } from "./json-rules.js";
export { needsOutputCheck, violation } from "./output-check.js";

export interface GbnfOptions {
  /** Default `single`: one optional space after `:` and `,`. */
  whitespace?: Whitespace;
}

/** The grammar for one JSON schema; the root rule is `root`. */
export function jsonSchemaToGbnf(schema: unknown, options: GbnfOptions = {}): string {
  return build(options.whitespace ?? "single", (grammar, json, budget, origins) => {
    const walk = new SchemaWalk(grammar, json, budget, schema, "");
    const rule = walk.compile();
    for (const [name, path] of walk.origins) origins.set(name, { path });
    return ref(rule);
  });
}

/** Any JSON object (`response_format: json_object`). */
export function jsonObjectGbnf(options: GbnfOptions = {}): string {
  return build(options.whitespace ?? "single", (_grammar, json) => json.object());
}

/**
 * A forced tool call: `{"name":NAME,"arguments":ARGS}` for one of `tools`, ARGS following that
 * tool's parameters schema, with no whitespace outside strings. A SchemaError names the tool's index.
 */
export function toolCallGbnf(tools: readonly Pick<ToolDefinition, "name" | "parameters">[]): string {
  return build("none", (grammar, json, budget, origins) => {
    const calls = tools.map((tool, index) => {
      try {
        const declared = tool.parameters.type;
        if (
          declared !== undefined &&
          declared !== "object" &&
          !(Array.isArray(declared) && declared.length === 1 && declared[0] === "object")
        )
          throw new SchemaError("type", "a tool's arguments are an object: its parameters schema must have type 'object'.");
        const walk = new SchemaWalk(grammar, json, budget, tool.parameters, `t${index}-`, "object");
        const rule = walk.compile();
        for (const [name, path] of walk.origins) origins.set(name, { path, tool: index });
        return seq(lit(`{"name":${JSON.stringify(tool.name)},"arguments":`), ref(rule), lit("}"));
      } catch (error) {
        throw error instanceof SchemaError && error.tool === undefined ? error.forTool(index) : error;
      }
    });
    return alt(...calls);
  });
}

export function constraintToGbnf(constraint: OutputConstraint): string {
  switch (constraint.type) {
    case "json":
      return jsonObjectGbnf();
    case "json_schema":
      return jsonSchemaToGbnf(constraint.schema);
    case "tool_call":
      return toolCallGbnf(constraint.tools);
  }
}

/**
 * Checks only that a JSON value (a tool's parameters that no grammar binds) is nested no deeper
 * than SCHEMA_LIMITS.depth, without recursion, so a hostile value cannot overflow any later walk.
 */
export function checkSchemaDepth(value: unknown): void {
  const stack: Array<{ value: unknown; depth: number; path: string }> = [{ value, depth: 0, path: "" }];
  while (stack.length > 0) {
    const { value: node, depth, path } = stack.pop()!;
    if (typeof node !== "object" || node === null) continue;
    if (depth > SCHEMA_LIMITS.depth) throw new SchemaError(path, `the schema is nested more than ${SCHEMA_LIMITS.depth} levels deep.`);
    for (const [key, child] of Object.entries(node)) {
      stack.push({ value: child, depth: depth + 1, path: Array.isArray(node) ? `${path}[${key}]` : path === "" ? key : `${path}.${key}` });
    }
  }
}

type Origins = Map<string, { path: string; tool?: number }>;

function build(whitespace: Whitespace, body: (grammar: Grammar, json: JsonRules, budget: Budget, origins: Origins) => Expr): string {
  const grammar = new Grammar();
  grammar.fresh("root");
  const origins: Origins = new Map();
  const root = body(grammar, new JsonRules(grammar, whitespace), new Budget(), origins);
  grammar.define("root", root);
  const { leftRecursion: cycle, unfinishable } = findDefects(grammar);
  if (cycle) throw blame(cycle, origins, "refers to itself before writing anything (a $ref cycle with nothing in between).");
  if (unfinishable.length > 0)
    throw blame(unfinishable, origins, "can never be finished: every value it allows contains itself (a $ref cycle with no way out).");
  return grammar.text();
}

/** The error for a defect found in the rules: it names the first schema definition among them. */
function blame(rules: readonly string[], origins: Origins, detail: string): SchemaError {
  // A definition inside the schema says more than the schema's root, which depends on it.
  const found = rules.map((rule) => origins.get(rule)).filter((o) => o !== undefined);
  const origin = found.find((o) => o.path !== "") ?? found[0];
  return new SchemaError(origin?.path ?? "", detail, origin?.tool);
}
