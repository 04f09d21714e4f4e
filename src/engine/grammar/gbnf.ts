/**
 * A small model of a GBNF grammar (llama.cpp's grammar format): expressions, named rules, and the
 * text llama.cpp parses. Grammars are built as values rather than strings so that they can be
 * checked (see analysis.ts) before llama.cpp sees them.
 */
export type Expr =
  | { readonly kind: "lit"; readonly text: string }
  /** A character class, written as GBNF (`[0-9]`); always one character. */
  | { readonly kind: "chars"; readonly set: string }
  | { readonly kind: "ref"; readonly rule: string }
  | { readonly kind: "seq"; readonly items: readonly Expr[] }
  | { readonly kind: "alt"; readonly items: readonly Expr[] }
  | { readonly kind: "rep"; readonly item: Expr; readonly min: number; readonly max: number | null };

export const EMPTY: Expr = { kind: "lit", text: "" };

export const lit = (text: string): Expr => ({ kind: "lit", text });
export const chars = (set: string): Expr => ({ kind: "chars", set });
export const ref = (rule: string): Expr => ({ kind: "ref", rule });

export function seq(...items: Expr[]): Expr {
  const flat = items.flatMap((item) => (item.kind === "seq" ? item.items : isEmpty(item) ? [] : [item]));
  return flat.length === 0 ? EMPTY : flat.length === 1 ? flat[0]! : { kind: "seq", items: flat };
}

export function alt(...items: Expr[]): Expr {
  const flat = items.flatMap((item) => (item.kind === "alt" ? item.items : [item]));
  return flat.length === 1 ? flat[0]! : { kind: "alt", items: flat };
}

/**
 * `item{min,max}` (max null: unbounded). llama.cpp expands a repetition into one rule per count and
 * refuses one whose repeated element spans several rules, so only a rule reference or a character
 * class is repeated: anything larger gets its own rule first.
 */
export function rep(item: Expr, min: number, max: number | null): Expr {
  if (item.kind !== "ref" && item.kind !== "chars" && !(item.kind === "lit" && [...item.text].length === 1)) {
    throw new Error("internal: only a rule, a character class or one character is repeated");
  }
  if (max === 0) return EMPTY;
  if (min === 1 && max === 1) return item;
  return { kind: "rep", item, min, max };
}

export const opt = (item: Expr): Expr => rep(item, 0, 1);

function isEmpty(expr: Expr): boolean {
  return expr.kind === "lit" && expr.text === "";
}

/** Named rules in definition order, with fresh names on demand. */
export class Grammar {
  readonly rules = new Map<string, Expr>();
  private readonly reserved = new Set<string>();
  /** The next suffix to try per stem, so that thousands of rules from one stem stay linear. */
  private readonly suffixes = new Map<string, number>();

  /** A rule name not yet used, built from `base` (GBNF names allow letters, digits and dashes). */
  fresh(base: string): string {
    const stem =
      base
        .replace(/[^A-Za-z0-9-]+/g, "-")
        .replace(/^-+|-+$/g, "")
        .slice(0, 40) || "r";
    let name = stem;
    for (let i = this.suffixes.get(stem) ?? 1; this.reserved.has(name); i++) {
      name = `${stem}-${i}`;
      this.suffixes.set(stem, i + 1);
    }
    this.reserved.add(name);
    return name;
  }

  /** Defines `name` (reserving it if it is new). A rule defined twice is a bug in the caller. */
  define(name: string, body: Expr): string {
    if (this.rules.has(name)) throw new Error(`internal: rule ${name} defined twice`);
    this.reserved.add(name);
    this.rules.set(name, body);
    return name;
  }

  has(name: string): boolean {
    return this.rules.has(name);
  }

  /** The GBNF text, root first. */
  text(root = "root"): string {
    const names = [root, ...[...this.rules.keys()].filter((n) => n !== root)];
    return names.map((name) => `${name} ::= ${write(this.rules.get(name)!, false)}\n`).join("");
  }
}

function write(expr: Expr, nested: boolean): string {
  switch (expr.kind) {
    case "lit":
      return quote(expr.text);
    case "chars":
      return expr.set;
    case "ref":
      return expr.rule;
    case "seq":
      return expr.items.map((item) => write(item, true)).join(" ");
    case "alt": {
      const body = expr.items.map((item) => write(item, false)).join(" | ");
      return nested ? `(${body})` : body;
    }
    case "rep":
      return write(expr.item, true) + repetition(expr.min, expr.max);
  }
}

function repetition(min: number, max: number | null): string {
  if (min === 0 && max === 1) return "?";
  if (min === 0 && max === null) return "*";
  if (min === 1 && max === null) return "+";
  if (max === null) return `{${min},}`;
  return min === max ? `{${min}}` : `{${min},${max}}`;
}

/** A GBNF string literal. Characters outside ASCII stay as UTF-8, which llama.cpp decodes. */
export function quote(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}
