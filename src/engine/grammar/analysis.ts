import type { Expr, Grammar } from "./gbnf.js";

/**
 * Two properties of a grammar that llama.cpp does not check for us, or checks only by failing:
 * - every rule can finish: a rule that cannot (a schema whose every value must contain itself)
 *   lets the model start a value it can never close, so it generates until max_tokens;
 * - no rule reaches itself before consuming a character (left recursion), which llama.cpp refuses.
 * Both come from `$ref` cycles; the walk names the definition involved. Both are linear in the
 * grammar's size except within a cycle of rules, as a schema may define thousands of rules.
 */

export interface Defects {
  /** Rules reachable from the root that no finite text matches. */
  unfinishable: string[];
  /** A cycle of rules that reach themselves without consuming a character, or null. */
  leftRecursion: string[] | null;
}

export function findDefects(grammar: Grammar, root = "root"): Defects {
  const deps = new Map<string, string[]>();
  for (const [name, body] of grammar.rules) deps.set(name, references(body));
  const order = components(grammar.rules.keys(), (name) => deps.get(name) ?? []);
  const finishes = settle(grammar, order, canFinish);
  const empty = settle(grammar, order, nullable);
  const edges = new Map<string, string[]>();
  for (const [name, body] of grammar.rules) edges.set(name, [...leftmost(body, empty)]);
  let cycle: string[] | null = null;
  for (const component of components(grammar.rules.keys(), (name) => edges.get(name) ?? [])) {
    if (component.length > 1 || edges.get(component[0]!)?.includes(component[0]!)) cycle ??= component;
  }
  return { unfinishable: [...reachable(deps, root)].filter((name) => !finishes.has(name)), leftRecursion: cycle };
}

/**
 * The least set of rules whose body `holds`, where `holds` may depend on the set so far: component
 * by component, dependencies first, so that only the rules of a cycle are looked at more than once.
 */
function settle(grammar: Grammar, order: readonly string[][], holds: (body: Expr, known: ReadonlySet<string>) => boolean): Set<string> {
  const known = new Set<string>();
  for (const component of order) {
    for (let changed = true; changed;) {
      changed = false;
      for (const name of component) {
        if (!known.has(name) && holds(grammar.rules.get(name)!, known)) {
          known.add(name);
          changed = true;
        }
      }
    }
  }
  return known;
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
  if (expr.kind === "ref") out.add(expr.rule);
  else if (expr.kind === "alt" || expr.kind === "rep")
    (expr.kind === "alt" ? expr.items : [expr.item]).forEach((item) => leftmost(item, empty, out));
  else if (expr.kind === "seq") {
    for (const item of expr.items) {
      leftmost(item, empty, out);
      if (!nullable(item, empty)) break;
    }
  }
  return out;
}

/**
 * Tarjan's strongly connected components, without recursion; each component comes after every
 * component it reaches.
 */
function components(nodes: Iterable<string>, edges: (node: string) => readonly string[]): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  const work: Array<{ node: string; next: number; targets: readonly string[] }> = [];
  const open = (node: string) => {
    low.set(node, index.size);
    index.set(node, index.size);
    stack.push(node);
    onStack.add(node);
    work.push({ node, next: 0, targets: edges(node) });
  };
  for (const root of nodes) {
    if (index.has(root)) continue;
    open(root);
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      if (frame.next < frame.targets.length) {
        const target = frame.targets[frame.next++]!;
        if (!index.has(target)) open(target);
        else if (onStack.has(target)) low.set(frame.node, Math.min(low.get(frame.node)!, index.get(target)!));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      if (low.get(frame.node) !== index.get(frame.node)) continue;
      const component: string[] = [];
      for (let member: string | undefined; member !== frame.node;) {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      }
      out.push(component);
    }
  }
  return out;
}

function reachable(deps: ReadonlyMap<string, readonly string[]>, root: string): Set<string> {
  const seen = new Set<string>([root]);
  const todo = [root];
  while (todo.length > 0) {
    for (const name of deps.get(todo.pop()!) ?? []) {
      if (!seen.has(name)) {
        seen.add(name);
        todo.push(name);
      }
    }
  }
  return seen;
}

/** The distinct rules an expression refers to. */
function references(expr: Expr): string[] {
  const out = new Set<string>();
  const visit = (e: Expr): void => {
    if (e.kind === "ref") out.add(e.rule);
    else if (e.kind === "seq" || e.kind === "alt") e.items.forEach(visit);
    else if (e.kind === "rep") visit(e.item);
  };
  visit(expr);
  return [...out];
}
