/** The API's JSON shapes as the console reads them (fractional numbers arrive as exact text). */
export type Exact = string | number;

export interface PriceTriple {
  input: Exact;
  output: Exact;
  cached_input: Exact;
  multiplier?: Exact;
}

/** The service tiers as the API names them everywhere (OpenAI's "default" is the standard tier). */
export type ServiceTier = "default" | "priority" | "flex" | "batch";

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

export interface UsageTotals {
  requests: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost_usd: Exact;
}

export interface UsageReport {
  totals: UsageTotals;
  data: Array<UsageTotals & { group: string }>;
}

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
