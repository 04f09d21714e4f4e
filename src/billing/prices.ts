/**
 * Effective per-1M-token prices: list price × (1 − discount/100) × tier multiplier, exact.
 * Only multiplications are used (discount/100 is ×0.01), so no rounding ever happens.
 */
import type { ModelPricing, TokenPrices } from "../catalog/types.js";
import type { RequestedTier, ServiceTier } from "../protocol/tiers.js";
import { Dec, parseNonNegative, toText, type Decimal } from "./decimal.js";

export type { RequestedTier };

const PRICE_KEYS = ["input", "output", "cached_input"] as const;
/** Every model runs batches; at half the standard price unless its catalog entry says otherwise (as OpenAI). */
const DEFAULT_BATCH_MULTIPLIER = "0.5";
const ONE = Dec("1");
const HUNDRED = Dec("100");
const PERCENT = Dec("0.01");

/** The discount factor (1 − discount/100); throws unless 0 ≤ discount ≤ 100. */
function discountFactor(pricing: ModelPricing): Decimal {
  if (pricing.discount_percent === undefined) return ONE;
  const pct = parseNonNegative(pricing.discount_percent, "pricing.discount_percent");
  if (pct.gt(HUNDRED)) {
    throw new RangeError(`pricing.discount_percent must be at most 100, got "${pricing.discount_percent}"`);
  }
  return ONE.minus(pct.times(PERCENT));
}

/** The multiplier of a tier against standard, or undefined when the model does not offer the tier. */
export function tierMultiplier(pricing: ModelPricing, tier: ServiceTier): string | undefined {
  if (tier === "default") return "1";
  const raw = pricing.tiers?.[tier] ?? (tier === "batch" ? DEFAULT_BATCH_MULTIPLIER : undefined);
  if (raw === undefined) return undefined;
  return toText(parseNonNegative(raw, `pricing.tiers.${tier}`));
}

/** Tiers the model offers, "default" always first, then "priority", "flex" when present. */
export function supportedTiers(pricing: ModelPricing): ServiceTier[] {
  const tiers: ServiceTier[] = ["default"];
  if (pricing.tiers?.priority !== undefined) tiers.push("priority");
  if (pricing.tiers?.flex !== undefined) tiers.push("flex");
  return tiers;
}

/**
 * The tier a request is served (and billed, and echoed) at: "auto", null or absent → "default";
 * "scale" and "fast" → "priority"; a tier the model does not offer → "default".
 */
export function resolveTier(pricing: ModelPricing, requested: RequestedTier | null | undefined): ServiceTier {
  if (requested === "scale" || requested === "fast") requested = "priority";
  if (requested === "priority" || requested === "flex") {
    return pricing.tiers?.[requested] !== undefined ? requested : "default";
  }
  return "default";
}

/**
 * The tier a request is served at and its prices there: a batch line's is always "batch" (whatever
 * the line asks), anyone else's the one it asked for (resolveTier). Every request resolves it here.
 */
export function servedTier(
  pricing: ModelPricing,
  requested: RequestedTier | null | undefined,
  inBatch: boolean,
): { tier: ServiceTier; prices: TokenPrices } {
  const tier = inBatch ? "batch" : resolveTier(pricing, requested);
  return { tier, prices: effectivePrices(pricing, tier) };
}

/** Exact effective prices (USD per 1M tokens) at a tier; throws if the model does not offer the tier. */
export function effectivePrices(pricing: ModelPricing, tier: ServiceTier): TokenPrices {
  const multiplier = tierMultiplier(pricing, tier);
  if (multiplier === undefined) {
    throw new RangeError(`service tier "${tier}" is not supported by this model`);
  }
  const factor = discountFactor(pricing).times(Dec(multiplier));
  const out = {} as TokenPrices;
  for (const key of PRICE_KEYS) {
    out[key] = toText(parseNonNegative(pricing[key], `pricing.${key}`).times(factor));
  }
  return out;
}
