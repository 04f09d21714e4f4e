import type { ServiceTier } from "../protocol/tiers.js";
import type { SpeculationCounts } from "./types.js";

/** A stream's hold on its generation (backpressure), as the HTTP layer implements it: see engine/types.ts. */
export type { PauseControl } from "../protocol/generation.js";

/**
 * What one request reports to monitoring as it goes. Labels are the model and the tier served,
 * never the account: metrics are for operators and carry nothing of a caller's.
 */
export interface RequestObserver {
  /** Admitted to the engine after `queueMs`; `cachedTokens` of `promptTokens` came from the prefix cache. */
  admitted(queueMs: number, promptTokens: number, cachedTokens: number): void;
  /** Output reached the caller (a text delta or tool calls) for choice `index`. */
  output(index: number): void;
  preempted(): void;
  /** A choice finished having verified drafts (its prediction's, or the engine's own): its totals. */
  speculated(counts: SpeculationCounts): void;
  /** The request ended; `finishReason` is the last choice's (or `cancelled`, `failed`). */
  finished(finishReason: string, completionTokens: number): void;
}

export interface ServingMetrics {
  request(model: string, tier: ServiceTier): RequestObserver;
}

/** What serving tells a request's trace (observability/tracing.ts implements it). */
export type { RequestTrace, TraceAttributes, TraceStage } from "./trace-port.js";
