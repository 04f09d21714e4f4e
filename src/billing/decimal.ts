/**
 * Internal exact-decimal helpers for src/billing. Every money value crosses module boundaries as a
 * plain decimal string ("0.000014357"); inside, it is a big.js value from a private constructor in
 * strict mode, so a JS `number` can never silently enter (or leave) money arithmetic.
 */
import BigModule from "big.js";

// big.js is CommonJS-with-default under NodeNext; `Big()` returns an independent constructor.
export const Dec: BigModule.BigConstructor = BigModule();
Dec.strict = true; // throws on Big(number), valueOf(), lossy toNumber()
Dec.RM = Dec.roundHalfUp;

export type Decimal = BigModule.Big;

/** Plain decimal, optional sign, no exponent, no leading "+", at least one digit each side of ".". */
const SIGNED_DECIMAL = /^-?\d+(?:\.\d+)?$/;
const UNSIGNED_DECIMAL = /^\d+(?:\.\d+)?$/;

/** Parses a signed plain decimal string; throws TypeError on anything else (exponents, NaN, numbers). */
export function parseMoney(value: string, what = "amount"): Decimal {
  if (typeof value !== "string" || !SIGNED_DECIMAL.test(value)) {
    throw new TypeError(`${what} must be a decimal string, got ${describe(value)}`);
  }
  return Dec(value);
}

/** Parses a non-negative plain decimal string (prices, multipliers, percentages). */
export function parseNonNegative(value: string, what: string): Decimal {
  if (typeof value !== "string" || !UNSIGNED_DECIMAL.test(value)) {
    throw new TypeError(`${what} must be a non-negative decimal string, got ${describe(value)}`);
  }
  return Dec(value);
}

/** Parses a token count: a non-negative safe integer (or bigint), converted without float arithmetic. */
export function parseCount(value: number | bigint, what: string): Decimal {
  if (typeof value === "bigint") {
    if (value < 0n) throw new RangeError(`${what} must be a non-negative integer, got ${value}`);
    return Dec(value.toString());
  }
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${what} must be a non-negative safe integer, got ${describe(value)}`);
  }
  return Dec(value.toString()); // safe integers print exactly, never in exponent form
}

/** Exact plain-notation text: no exponent, trailing zeros trimmed, never "-0". */
export function toText(value: Decimal): string {
  return value.toFixed();
}

function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : `${typeof value} ${String(value)}`;
}
