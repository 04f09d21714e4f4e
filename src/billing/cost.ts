/**
 * Exact request cost and money helpers. Amounts are plain decimal strings in US dollars.
 */
import type { TokenPrices } from "../catalog/types.js";
import { Dec, parseCount, parseMoney, parseNonNegative, toText } from "./decimal.js";

export interface TokenUsage {
  /** All prompt tokens, cached ones included (OpenAI's `usage.prompt_tokens`). */
  promptTokens: number;
  /** The part of promptTokens served from the prompt cache (`prompt_tokens_details.cached_tokens`). */
  cachedPromptTokens: number;
  completionTokens: number;
}

const ZERO = Dec("0");
const PER_TOKEN = Dec("0.000001"); // prices are per 1M tokens; ×10⁻⁶ is exact, unlike ÷

/**
 * Cost in dollars: ((prompt − cached) × input + cached × cached_input + completion × output) / 1e6,
 * exact (no rounding). Throws if a count is not a non-negative safe integer or cached > prompt.
 */
export function requestCost(prices: TokenPrices, usage: TokenUsage): string {
  const prompt = parseCount(usage.promptTokens, "promptTokens");
  const cached = parseCount(usage.cachedPromptTokens, "cachedPromptTokens");
  const completion = parseCount(usage.completionTokens, "completionTokens");
  if (cached.gt(prompt)) {
    throw new RangeError(`cachedPromptTokens (${usage.cachedPromptTokens}) exceeds promptTokens (${usage.promptTokens})`);
  }
  const total = prompt
    .minus(cached)
    .times(parseNonNegative(prices.input, "prices.input"))
    .plus(cached.times(parseNonNegative(prices.cached_input, "prices.cached_input")))
    .plus(completion.times(parseNonNegative(prices.output, "prices.output")));
  return toText(total.times(PER_TOKEN));
}

/** a + b, exact. */
export function addMoney(a: string, b: string): string {
  return toText(parseMoney(a, "a").plus(parseMoney(b, "b")));
}

/** Sign of a − b. */
export function compareMoney(a: string, b: string): -1 | 0 | 1 {
  return parseMoney(a, "a").cmp(parseMoney(b, "b"));
}

/**
 * Rounds half-up (half away from zero) to `decimals` places and prints exactly that many decimals
 * ("0.30" for 0.3 at 2). For display only; never feed the result back into billing.
 */
export function roundMoney(value: string, decimals: number): string {
  if (!Number.isInteger(decimals) || decimals < 0 || decimals > 100) {
    throw new RangeError(`decimals must be an integer from 0 to 100, got ${decimals}`);
  }
  const rounded = parseMoney(value, "value").round(decimals, Dec.roundHalfUp);
  const text = rounded.toFixed(decimals);
  // "-0.000" after rounding a tiny negative to zero reads badly; zero has no sign.
  return rounded.eq(ZERO) ? ZERO.toFixed(decimals) : text;
}
