/**
 * The API's JSON shapes as the console reads them, imported from src/protocol/, where the server's
 * routes declare what they send (types only: nothing of the server is bundled). Fractional numbers
 * arrive as exact text (api.ts's parseExact), so the exact decimals read as `Exact`.
 */
import type { WireBatch } from "../../src/protocol/batches-response.js";
import type { WireUsage } from "../../src/protocol/chat-response.js";
import type { WireHealth, WireHealthModel } from "../../src/protocol/health-response.js";
import type { WireCreatedKey, WireKey } from "../../src/protocol/keys-response.js";
import type { PriceTriple as ExactPriceTriple, WireModel as ExactWireModel } from "../../src/protocol/models-response.js";
import type { ServiceTier } from "../../src/protocol/tiers.js";
import type { WireUsageReport, WireUsageTotals } from "../../src/protocol/usage.js";

/** The service tiers as the API names them everywhere (OpenAI's "default" is the standard tier). */
export type { ServiceTier };

/** `/health` (no key needed), read with plain JSON.parse: its fractions are numbers. */
export type { WireHealth, WireHealthModel };

/** A batch of the Batch API (`/v1/batches`). */
export type { WireBatch };

/** A key of `/v1/keys`; the secret (`key`) only in the answer that created it. */
export type { WireCreatedKey, WireKey };

export type Exact = string | number;

/** US dollars per 1M tokens. */
export type PriceTriple = ExactPriceTriple<Exact>;

/** A model of `/v1/models`, its prices exact. */
export type WireModel = ExactWireModel<Exact>;

/** A usage report's totals (GET /v1/usage), as src/protocol/usage.ts sends them. */
export type UsageTotals = Omit<WireUsageTotals, "cost_usd"> & { cost_usd: Exact };

export type UsageReport = Omit<WireUsageReport, "totals" | "data" | "deployments"> & {
  totals: UsageTotals;
  data: Array<UsageTotals & { group: string }>;
};

/** A chat answer's usage (its last chunk when streamed); rejected prediction tokens are in completion_tokens (billed), not in the answer. */
export type ChatUsage = Omit<WireUsage, "estimated_cost"> & { estimated_cost: Exact };
