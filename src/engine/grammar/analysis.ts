import type { Expr, Grammar } from "./gbnf.js";

/**
 * Two properties of a grammar that llama.cpp does not check for us, or checks only by failing:
 * - every rule can finish: a rule that cannot (a schema whose every value must contain itself)
 *   lets the model start a value it can never close, so it generates until max_tokens;
 * - no rule reaches itself before consuming a character (left recursion), which llama.cpp refuses.
 * Both come from `$ref` cycles; the walk names the definition involved.
 */

/** Rules reachable from `root` that no finite text matches. */
export function unfinishableRules(grammar: Grammar, root = "root"): string[] {
  const finishes = new Set<string>();
  // Fixpoint: a rule finishes once one of its alternatives is made only of parts that finish.
  // Rules mostly refer to rules defined after them, so going backwards settles in few passes.
  const rules = [...grammar.rules].reverse();
  for (let changed = true; changed; ) {
    changed = false;
    for (const [name, body] of rules) {
      if (!finishes.has(name) && canFinish(body, finishes)) {
        finishes.add(name);
        changed = true;
      }
    }
  }
  return [...reachable(grammar, root)].filter((name) => !finishes.has(name));
}

function canFinish(expr: Expr, finishes: ReadonlySet<string>): boolean {
  switch (expr.kind) {
    case "lit":
    case "chars":
      return true;
    case "ref":
      return finishes.has(expr.rule);
    case "seq":
      return expr.items.every((item) => canFinish(item, finishes));
    case "alt":
      return expr.items.some((item) => canFinish(item, finishes));
    case "rep":
      return expr.min === 0 || canFinish(expr.item, finishes);
  }
}

/** A cycle of rules that reach themselves without consuming a character, or null. */
export function leftRecursion(grammar: Grammar): string[] | null {
  const empty = nullableRules(grammar);
  const edges = new Map<string, string[]>();
  for (const [name, body] of grammar.rules) edges.set(name, [...leftmost(body, empty)]);
  // Iterative depth-first search: a schema may define thousands of rules.
  const state = new Map<string, "open" | "done">();
  for (const start of grammar.rules.keys()) {
    if (state.has(start)) continue;
    const path: Array<{ name: string; next: number }> = [{ name: start, next: 0 }];
    state.set(start, "open");
    while (path.length > 0) {
      const top = path[path.length - 1]!;
      const targets = edges.get(top.name) ?? [];
      if (top.next >= targets.length) {
        state.set(top.name, "done");
        path.pop();
        continue;
      }
      const target = targets[top.next++]!;
      if (state.get(target) === "open") return [...path.slice(path.findIndex((p) => p.name === target)).map((p) => p.name), target];
      if (!state.has(target)) {
        state.set(target, "open");
        path.push({ name: target, next: 0 });
      }
    }
  }
  return null;
}

function nullableRules(grammar: Grammar): Set<string> {
  const empty = new Set<string>();
  const rules = [...grammar.rules].reverse();
  for (let changed = true; changed; ) {
    changed = false;
    for (const [name, body] of rules) {
      if (!empty.has(name) && nullable(body, empty)) {
        empty.add(name);
        changed = true;
      }
    }
  }
  return empty;
}

function nullable(expr: Expr, empty: ReadonlySet<string>): boolean {
  switch (expr.kind) {
    case "lit":
      return expr.text === "";
    case "chars":
      return false;
    case "ref":
      return empty.has(expr.rule);
    case "seq":
      return expr.items.every((item) => nullable(item, empty));
    case "alt":
      return expr.items.some((item) => nullable(item, empty));
    case "rep":
      return expr.min === 0 || nullable(expr.item, empty);
  }
}

/** The rules that may be entered before any character of `expr` is consumed. */
function leftmost(expr: Expr, empty: ReadonlySet<string>, out = new Set<string>()): Set<string> {
  switch (expr.kind) {
    case "ref":
      out.add(expr.rule);
      break;
    case "seq":
      for (const item of expr.items) {
        leftmost(item, empty, out);
        if (!nullable(item, empty)) break;
      }
      break;
    case "alt":
      for (const item of expr.items) leftmost(item, empty, out);
      break;
    case "rep":
      leftmost(expr.item, empty, out);
      break;
    default:
      break;
  }
  return out;
}

function reachable(grammar: Grammar, root: string): Set<string> {
  const seen = new Set<string>([root]);
  const todo = [root];
  while (todo.length > 0) {
    const body = grammar.rules.get(todo.pop()!);
    if (!body) continue;
    for (const name of references(body)) {
      if (!seen.has(name)) {
        seen.add(name);
        todo.push(name);
      }
    }
  }
  return seen;
}

function references(expr: Expr, out: string[] = []): string[] {
  if (expr.kind === "ref") out.push(expr.rule);
  else if (expr.kind === "seq" || expr.kind === "alt") for (const item of expr.items) references(item, out);
  else if (expr.kind === "rep") references(expr.item, out);
  return out;
}
