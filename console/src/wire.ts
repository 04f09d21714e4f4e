/**
 * The API's JSON shapes as the console reads them (fractional numbers arrive as exact text). Where
 * src/protocol/ declares a shape, it is imported from there (types only: nothing of the server is
 * bundled), its exact decimals read as `Exact`.
 */
import type { ServiceTier } from "../../src/protocol/tiers.js";
import type { WireUsageReport, WireUsageTotals } from "../../src/protocol/usage.js";

/** The service tiers as the API names them everywhere (OpenAI's "default" is the standard tier). */
export type { ServiceTier };

export type Exact = string | number;

export interface PriceTriple {
  input: Exact;
  output: Exact;
  cached_input: Exact;
  multiplier?: Exact;
}

/** One model in `/health` (no key needed); the load figures are absent until it is loaded. */
export interface WireHealthModel {
  id: string;
  state: string;
  error?: string;
  running?: number;
  waiting?: number;
  sequences?: number;
  idle_cached_sequences?: number;
  kv_cache_usage?: number | string;
  preemptions?: number;
  by_tier?: { running: Record<ServiceTier, number>; waiting: Record<ServiceTier, number> };
}

export interface WireModel {
  id: string;
  metadata: {
    context_length: number;
    precision: string;
    tags: string[];
    status: "loading" | "ready" | "failed";
    /** Short names requests may use instead of the id (the catalog's `aliases`). */
    aliases?: string[];
    dedicated_endpoint: boolean;
    pricing: {
      list: PriceTriple;
      discount_percent: Exact;
      tiers: { default: PriceTriple; priority?: PriceTriple; flex?: PriceTriple; batch?: PriceTriple };
    };
  };
}

/** A batch of the Batch API (`/v1/batches`). */
export interface WireBatch {
  id: string;
  endpoint: string;
  status: string;
  created_at: number;
  completed_at: number | null;
  expires_at: number;
  output_file_id: string | null;
  error_file_id: string | null;
  request_counts: { total: number; completed: number; failed: number };
  errors: { data: Array<{ code: string; message: string; line: number | null }> } | null;
  metadata: Record<string, string> | null;
}

/** A usage report's totals (GET /v1/usage), as src/protocol/usage.ts sends them. */
export type UsageTotals = Omit<WireUsageTotals, "cost_usd"> & { cost_usd: Exact };

export type UsageReport = Omit<WireUsageReport, "totals" | "data" | "deployments"> & {
  totals: UsageTotals;
  data: Array<UsageTotals & { group: string }>;
};

export interface WireKey {
  id: string;
  name: string | null;
  prefix: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  last_used_at: number | null;
  allowed_models: string[] | null;
  rpm_limit: number | null;
  tpm_limit: number | null;
  budget_usd: string | null;
  spent_usd: string;
  manage_keys: boolean;
  manage_deployments: boolean;
  key?: string;
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  estimated_cost?: Exact;
  prompt_tokens_details?: { cached_tokens?: number };
  /** Rejected prediction tokens are in completion_tokens (billed), not in the answer. */
  completion_tokens_details?: { reasoning_tokens?: number; accepted_prediction_tokens?: number; rejected_prediction_tokens?: number };
}
