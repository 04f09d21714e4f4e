/**
 * The `pricing` object shown per model in the models list (its shape: protocol/models-response.ts).
 * Every price is an ExactDecimal, so stringifyJson prints it as an exact JSON number.
 */
import type { ModelPricing } from "../catalog/types.js";
import { ExactDecimal } from "../protocol/money-json.js";
import type { PriceTriple, PricingView } from "../protocol/models-response.js";
import { effectivePrices, tierMultiplier } from "./prices.js";

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
