/**
 * A model as `GET /v1/models` shows it. Declared here so the server (serving/model-view.ts builds
 * it, billing/pricing-view.ts its prices) and the console that reads it agree by construction.
 * Prices are exact decimals: the server holds them as ExactDecimal, which stringifyJson writes as
 * exact JSON numbers; a reader names the type it reads them back as (`Money`).
 */
import type { ExactDecimal } from "./money-json.js";

/**
 * `not_pulled`: an on-demand catalog model whose file is not in the models dir. `stopped`: a
 * dedicated deployment scaled to zero. `elsewhere`: a deployment another server process runs.
 */
export type ModelState = "loading" | "ready" | "failed" | "not_pulled" | "stopped" | "elsewhere";

/** US dollars per 1M tokens. */
export interface PriceTriple<Money = ExactDecimal> {
  input: Money;
  output: Money;
  cached_input: Money;
}

/** A tier's effective prices, and its multiplier over the standard tier's. */
export type TierPrices<Money = ExactDecimal> = PriceTriple<Money> & { multiplier: Money };

/** The `pricing` object of a model. */
export interface PricingView<Money = ExactDecimal> {
  currency: "USD";
  unit: "per_1m_tokens";
  /** List prices, before the discount. */
  list: PriceTriple<Money>;
  discount_percent: Money;
  /** Effective prices (discount and multiplier applied) for each tier the model offers. */
  tiers: {
    default: PriceTriple<Money>;
    priority?: TierPrices<Money>;
    flex?: TierPrices<Money>;
    /** Lines of the Batch API; every model has it. */
    batch: TierPrices<Money>;
  };
}

export interface WireModel<Money = ExactDecimal> {
  id: string;
  object: "model";
  /** Unix seconds the catalog entry was published. */
  created: number;
  owned_by: string;
  metadata: {
    context_length: number;
    precision: string;
    tags: string[];
    /** Short names requests may use instead of the id (the catalog's `aliases`). */
    aliases: string[];
    pricing: PricingView<Money>;
    dedicated_endpoint: boolean;
    status: ModelState;
    /** A LoRA adapter: the catalog model it runs on. */
    adapter_of?: string;
    /** The caller's own deployment: which one, and the catalog model it runs. */
    deployment?: { id: string; model: string };
    /** The caller's own uploaded adapter: its id under /v1/adapters. */
    adapter?: { id: string };
  };
}
