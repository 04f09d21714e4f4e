/**
 * The `pricing` object shown per model in the models list. Every price is an ExactDecimal, so
 * stringifyJson prints it as an exact JSON number.
 */
import type { ModelPricing } from "../catalog/types.js";
import { ExactDecimal } from "../protocol/money-json.js";
import { effectivePrices, tierMultiplier } from "./prices.js";

export interface PriceTriple {
  input: ExactDecimal;
  output: ExactDecimal;
  cached_input: ExactDecimal;
}

export interface PricingView {
  currency: "USD";
  unit: "per_1m_tokens";
  /** List prices, before the discount. */
  list: PriceTriple;
  discount_percent: ExactDecimal;
  /** Effective prices (discount and multiplier applied) for each tier the model offers. */
  tiers: {
    default: PriceTriple;
    priority?: PriceTriple & { multiplier: ExactDecimal };
    flex?: PriceTriple & { multiplier: ExactDecimal };
    /** Lines of the Batch API; every model has it. */
    batch: PriceTriple & { multiplier: ExactDecimal };
  };
}

function triple(p: { input: string; output: string; cached_input: string }): PriceTriple {
  return {
    input: ExactDecimal.of(p.input),
    output: ExactDecimal.of(p.output),
    cached_input: ExactDecimal.of(p.cached_input),
  };
}

export function pricingView(pricing: ModelPricing): PricingView {
  const view: PricingView = {
    currency: "USD",
    unit: "per_1m_tokens",
    list: triple(pricing),
    discount_percent: ExactDecimal.of(pricing.discount_percent ?? "0"),
    tiers: { default: triple(effectivePrices(pricing, "default")) } as PricingView["tiers"],
  };
  for (const tier of ["priority", "flex", "batch"] as const) {
    const multiplier = tierMultiplier(pricing, tier);
    if (multiplier !== undefined) {
      view.tiers[tier] = { ...triple(effectivePrices(pricing, tier)), multiplier: new ExactDecimal(multiplier) };
    }
  }
  return view;
}
