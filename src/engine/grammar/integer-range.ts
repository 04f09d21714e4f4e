import { alt, chars, type Expr, lit, rep, seq } from "./gbnf.js";
import type { Schema } from "./keywords.js";
import { SchemaError } from "./limits.js";

/**
 * Integer ranges written exactly into the grammar: an integer schema's `minimum`, `maximum`,
 * `exclusiveMinimum` and `exclusiveMaximum` become the set of decimal texts (no leading zeros, no
 * `-0`) of the integers in range, built digit by digit as llama.cpp's own converter does. Bounds are
 * exact decimal integers (BigInt), so the safe-integer bounds zod v4 writes (±9007199254740991) are
 * honoured to the last digit.
 */

/** The most digits an integer may have (as json-rules.ts): a bound past this leaves that side open. */
export const INTEGER_DIGITS = 16;
const LARGEST = 10n ** BigInt(INTEGER_DIGITS) - 1n;

export const RANGE_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] as const;

/** The inclusive integer bounds a schema sets (null: open), or null when it sets none. */
export function integerBounds(schema: Schema, path: string): { low: bigint | null; high: bigint | null } | null {
  if (!RANGE_KEYWORDS.some((key) => key in schema)) return null;
  const lows: bigint[] = [];
  const highs: bigint[] = [];
  for (const key of RANGE_KEYWORDS) {
    const value = schema[key];
    if (value === undefined) continue;
    if (typeof value !== "number" || !Number.isFinite(value))
      throw new SchemaError(path === "" ? key : `${path}.${key}`, "must be a number.");
    // The least (greatest) integer that the bound allows; a double's value is an exact integer when it is integral.
    if (key === "minimum") lows.push(BigInt(Math.ceil(value)));
    if (key === "exclusiveMinimum") lows.push(BigInt(Math.floor(value)) + 1n);
    if (key === "maximum") highs.push(BigInt(Math.floor(value)));
    if (key === "exclusiveMaximum") highs.push(BigInt(Math.ceil(value)) - 1n);
  }
  // biome-ignore lint/complexity/useMathMinMax: bigints, which Math.max cannot take
  const low = lows.length === 0 ? null : lows.reduce((a, b) => (a > b ? a : b));
  // biome-ignore lint/complexity/useMathMinMax: bigints, which Math.min cannot take
  const high = highs.length === 0 ? null : highs.reduce((a, b) => (a < b ? a : b));
  if (low !== null && high !== null && low > high) throw new SchemaError(path, "no integer lies between its minimum and maximum.");
  return { low: low !== null && low < -LARGEST ? null : low, high: high !== null && high > LARGEST ? null : high };
}

/** Whether an integer lies within the bounds. */
export function withinBounds(value: bigint, bounds: { low: bigint | null; high: bigint | null }): boolean {
  return (bounds.low === null || value >= bounds.low) && (bounds.high === null || value <= bounds.high);
}

/** The decimal texts of the integers in low..high (null: open, up to INTEGER_DIGITS digits). */
export function integerRange(low: bigint | null, high: bigint | null): Expr {
  const parts: Expr[] = [];
  const lo = low ?? -LARGEST;
  const hi = high ?? LARGEST;
  // Negative numbers are a minus sign and the magnitudes in -hi..-lo (those above 0).
  if (lo < 0n) parts.push(seq(lit("-"), naturals(hi < 0n ? -hi : 1n, -lo)));
  if (hi >= 0n) parts.push(naturals(lo > 0n ? lo : 0n, hi));
  return alt(...parts);
}

/** The texts of the non-negative integers in a..b, grouped by length. */
function naturals(a: bigint, b: bigint): Expr {
  const from = a.toString();
  const to = b.toString();
  if (from.length === to.length) return sameLength(from, to);
  const parts = [sameLength(from, "9".repeat(from.length))];
  // Every length strictly between: any first digit but 0, then any digits.
  if (to.length - from.length > 1) parts.push(seq(chars("[1-9]"), rep(chars("[0-9]"), from.length, to.length - 2)));
  parts.push(sameLength(`1${"0".repeat(to.length - 1)}`, to));
  return alt(...parts);
}

/** The digit strings of one length between x and y, both of that length, x ≤ y. */
function sameLength(x: string, y: string): Expr {
  if (x.length === 0) return lit("");
  const [x0, y0] = [Number(x[0]), Number(y[0])];
  const restX = x.slice(1);
  const restY = y.slice(1);
  if (x0 === y0) return seq(lit(x[0]!), sameLength(restX, restY));
  const lowest = "0".repeat(restX.length);
  const highest = "9".repeat(restX.length);
  if (restX === lowest && restY === highest) return seq(digitSpan(x0, y0), anyDigits(restX.length));
  const parts: Expr[] = [];
  // The first digit x0 with the rest at least restX, the digits between with any rest, y0 with at most restY.
  const firstFull = restX === lowest;
  const lastFull = restY === highest;
  const middleFrom = firstFull ? x0 : x0 + 1;
  const middleTo = lastFull ? y0 : y0 - 1;
  if (!firstFull) parts.push(seq(lit(x[0]!), sameLength(restX, highest)));
  if (middleFrom <= middleTo) parts.push(seq(digitSpan(middleFrom, middleTo), anyDigits(restX.length)));
  if (!lastFull) parts.push(seq(lit(y[0]!), sameLength(lowest, restY)));
  return alt(...parts);
}

const digitSpan = (from: number, to: number): Expr => (from === to ? lit(String(from)) : chars(`[${from}-${to}]`));
const anyDigits = (count: number): Expr => rep(chars("[0-9]"), count, count);
