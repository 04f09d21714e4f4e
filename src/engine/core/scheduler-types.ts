import type { EngineRequest } from "./request.js";
import type { StepBudget, TargetsByTier } from "./step-budget.js";
import type { SpeculationMode } from "./speculation.js";
import type { ModelHostStats } from "../types.js";
import { perTier, type PerTier } from "../../protocol/tiers.js";

export interface ShardStats extends Pick<ModelHostStats, "running" | "waiting" | "preemptions"> {
  sequences: number;
  paused: number;
  usedCells: number;
  totalCells: number;
  /** The last planned step's budget. */
  budget: StepBudget;
  speculation: { draftTokens: number; acceptedTokens: number; acceptanceRate: number | null };
  /** Priority requests wait here with no lower-tier sequence left to preempt: priority's own load fills the shard. */
  prioritySaturated: boolean;
}

export interface ShardSchedulerOptions {
  /** This shard's index: requests queued here record it. */
  shard?: number;
  sequences: number;
  /** Its share of the model's sequences (core/sequence-cap.ts): fewer than `sequences` where shards have room for adapters. Default: `sequences`. */
  share?: number;
  cellsPerSequence: number;
  /** Most tokens in one step (the runner's batch). */
  stepTokens: number;
  prefixCache: boolean;
  /** Most prompt tokens one request takes while other prompts wait for theirs (default 64). */
  chunkCap?: number;
  /** Prompt tokens every step carries at least while a prompt loads (default 8). */
  minChunk?: number;
  /** Per-tier targets (default: step-budget.ts DEFAULT_TARGETS). */
  targets?: TargetsByTier;
  /** How long a running request may go without progress before it fails with StalledError (default: never). */
  stallTimeoutMs?: number;
  /** How long a paused request (its caller not reading) keeps its sequence before it is preempted (default: never). */
  pausedPreemptMs?: number;
  /** Speculative decoding (default: off). */
  speculation?: SpeculationMode;
}

/** Requests a shard's scheduler holds a sequence for, or will: running and waiting. */
export function sequencesHeld(scheduler: {
  readonly running: readonly EngineRequest[];
  readonly waiting: readonly EngineRequest[];
}): number {
  return scheduler.running.length + scheduler.waiting.length;
}

/** Requests of each tier in a list. */
export function countByTier(list: readonly EngineRequest[]): PerTier<number> {
  return perTier((tier) => list.filter((r) => r.tier === tier).length);
}
