import { alt, chars, EMPTY, type Expr, type Grammar, lit, opt, ref, rep, seq } from "./gbnf.js";

/**
 * Whitespace allowed between JSON tokens. Both are compact, so a small model cannot spend its
 * budget pretty-printing: `none` (tool-call arguments) allows none at all; `single` (JSON output)
 * one optional space after `:` and `,`. Neither allows whitespace before or after the value, so the
 * grammar has no continuation once the value is complete.
 */
export type Whitespace = "none" | "single";

/** Digits a number may have: enough for any double, and a bound on a runaway `0.3333...`. */
const INTEGER_DIGITS = 16;
const FRACTION_DIGITS = 16;
const EXPONENT_DIGITS = 3;

const hex = chars("[0-9a-fA-F]");
const digit = chars("[0-9]");

/** The JSON pieces that every grammar shares, each defined as a rule on first use. */
export class JsonRules {
  constructor(
    private readonly grammar: Grammar,
    readonly whitespace: Whitespace,
  ) {}

  private readonly building = new Set<string>();

  /** The rule `name`, defined by `body` the first time it is asked for (bodies may refer to it). */
  shared(name: string, body: () => Expr): Expr {
    if (!this.grammar.has(name) && !this.building.has(name)) {
      this.building.add(name);
      this.grammar.define(name, body());
      this.building.delete(name);
    }
    return ref(name);
  }

  private get space(): Expr {
    return this.whitespace === "single" ? opt(lit(" ")) : EMPTY;
  }

  colon(): Expr {
    return seq(lit(":"), this.space);
  }

  comma(): Expr {
    return seq(lit(","), this.space);
  }

  /** One character of a JSON string, an escape sequence being one. */
  char(): Expr {
    return this.shared("json-char", () =>
      alt(chars(String.raw`[^"\\\x00-\x1F\x7F]`), seq(lit("\\"), alt(chars(String.raw`["\\/bfnrt]`), seq(lit("u"), rep(hex, 4, 4))))),
    );
  }

  string(): Expr {
    return this.shared("json-string", () => seq(lit('"'), rep(this.char(), 0, null), lit('"')));
  }

  integer(): Expr {
    return this.shared("json-integer", () => seq(opt(lit("-")), alt(lit("0"), seq(chars("[1-9]"), rep(digit, 0, INTEGER_DIGITS - 1)))));
  }

  number(): Expr {
    return this.shared("json-number", () => {
      const fraction = this.shared("json-fraction", () => seq(lit("."), rep(digit, 1, FRACTION_DIGITS)));
      const exponent = this.shared("json-exponent", () => seq(chars("[eE]"), opt(chars("[-+]")), rep(digit, 1, EXPONENT_DIGITS)));
      return seq(this.integer(), opt(fraction), opt(exponent));
    });
  }

  boolean(): Expr {
    return alt(lit("true"), lit("false"));
  }

  /** Any JSON value. */
  value(): Expr {
    return this.shared("json-value", () => alt(this.object(), this.array(), this.string(), this.number(), this.boolean(), lit("null")));
  }

  /** Any JSON object. */
  object(): Expr {
    return this.shared("json-object", () => {
      const member = this.shared("json-member", () => seq(this.string(), this.colon(), this.value()));
      const more = this.shared("json-more-members", () => seq(this.comma(), member));
      return seq(lit("{"), opt(this.shared("json-members", () => seq(member, rep(more, 0, null)))), lit("}"));
    });
  }

  /** Any JSON array. */
  array(): Expr {
    return this.shared("json-array", () => {
      const more = this.shared("json-more-values", () => seq(this.comma(), this.value()));
      return seq(lit("["), opt(this.shared("json-values", () => seq(this.value(), rep(more, 0, null)))), lit("]"));
    });
  }

  /** A string in one of the formats FORMATS names, quotes included. */
  formatted(format: Format): Expr {
    return seq(
      lit('"'),
      this.shared(`format-${format}`, () => FORMAT_BODIES[format](this)),
      lit('"'),
    );
  }
}

const twoDigits = (first: string, second = "[0-9]"): Expr => seq(chars(first), chars(second));
const hour = alt(twoDigits("[01]"), seq(lit("2"), chars("[0-3]")));
const date = (): Expr =>
  seq(
    rep(digit, 4, 4),
    lit("-"),
    alt(seq(lit("0"), chars("[1-9]")), seq(lit("1"), chars("[0-2]"))),
    lit("-"),
    alt(seq(lit("0"), chars("[1-9]")), twoDigits("[12]"), seq(lit("3"), chars("[01]"))),
  );

/** RFC 3339 full-time: hours, minutes, seconds, optional fraction, and an offset. */
function time(rules: JsonRules): Expr {
  const fraction = rules.shared("format-second-fraction", () => seq(lit("."), rep(digit, 1, 6)));
  const offset = alt(lit("Z"), seq(chars("[+-]"), hour, lit(":"), twoDigits("[0-5]")));
  return seq(hour, lit(":"), twoDigits("[0-5]"), lit(":"), twoDigits("[0-5]"), opt(fraction), offset);
}

const hexRun = (count: number): Expr => rep(chars("[0-9a-f]"), count, count);

const FORMAT_BODIES = {
  date: () => date(),
  time: (rules: JsonRules) => time(rules),
  "date-time": (rules: JsonRules) => seq(date(), lit("T"), time(rules)),
  uuid: () => seq(hexRun(8), lit("-"), hexRun(4), lit("-"), hexRun(4), lit("-"), hexRun(4), lit("-"), hexRun(12)),
} satisfies Record<string, (rules: JsonRules) => Expr>;

export type Format = keyof typeof FORMAT_BODIES;
export const FORMATS = new Set<string>(Object.keys(FORMAT_BODIES));
