/**
 * `GET /health` as it answers: readiness, and each public model's state and load. Declared here so
 * the health route (http/routes/health.ts) that writes it and the console's Engines page that reads
 * it agree by construction.
 */
import type { ModelState } from "./models-response.js";
import type { PerTier } from "./tiers.js";

/** What an embedding model's queue has done since start (the engine's counters, as /health shows them). */
export interface EmbeddingStats {
  waitingInputs: number;
  embeddedInputs: number;
  embeddedTokens: number;
  batches: number;
  decodeSeconds: number;
}

/** The step loop's totals since start, so an operator (and the benchmark) can see where the time goes. */
export interface WireEngineCounters {
  steps: number;
  batch_tokens: number;
  prompt_tokens_computed: number;
  restored_cells: number;
  sampled_tokens: number;
  setup_seconds: number;
  decode_seconds: number;
  sample_seconds: number;
  step_round_trip_seconds: number;
  host_seconds: number;
  adapter_turn_steps: number;
  moved_requests: number;
}

/**
 * A shard's last planned step: the time budget in force (null: nobody decoding), its tokens and
 * predicted time, the cost model's coefficients, and its speculative decoding since start.
 */
export interface WireStepBudget {
  step_budget_ms: number | null;
  step_budget_tokens: number;
  planned_step_ms: number;
  cost_model: {
    fixed_ms: number;
    per_sampled_token_ms: number;
    per_prompt_token_ms: number;
    per_1k_attended_ms: number;
    per_draft_token_ms: number;
  };
  /** acceptance_rate null: nothing drafted yet. */
  speculation: { draft_tokens: number; accepted_tokens: number; acceptance_rate: number | null };
}

/** An upstream engine's replica, as its pool sees it. */
export interface WireReplica {
  index: number;
  health: "up" | "down";
  running: number;
  max_concurrency: number;
  /** Requests sent to it since start. */
  served: number;
}

/** A loaded chat model's load: totals first (what a load balancer reads), then the split by tier. */
export interface WireModelLoad {
  running: number;
  waiting: number;
  sequences: number;
  idle_cached_sequences: number;
  /** Share of all KV cells holding tokens, 0..1, to four places. */
  kv_cache_usage: number;
  preemptions: number;
  priority_saturated?: boolean;
  /** Running requests whose client is not reading their stream. */
  paused?: number;
  by_tier: { running: PerTier<number>; waiting: PerTier<number> };
  /** The embedded engine only: its step counters and each shard's last planned step. */
  engine?: WireEngineCounters & { shards?: WireStepBudget[] };
  /** An upstream engine only. */
  replicas?: WireReplica[];
}

/** One public model in /health; the load figures are absent until it is loaded. */
export type WireHealthModel = { id: string; state: ModelState; embeddings?: EmbeddingStats; error?: string } & Partial<WireModelLoad>;

/** The whole answer: 200 with `ok` once every model is loaded, else 503. */
export interface WireHealth {
  status: "ok" | "loading" | "degraded" | "draining";
  models: WireHealthModel[];
}
