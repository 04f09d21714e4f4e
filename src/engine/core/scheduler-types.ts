import type { EngineRequest } from "./request.js";
import type { StepBudget, TargetsByClass } from "./step-budget.js";
import type { ModelHostStats, SchedulingClass } from "../types.js";

export interface ShardStats extends Pick<ModelHostStats, "running" | "waiting" | "preemptions"> {
  sequences: number;
  paused: number;
  usedCells: number;
  totalCells: number;
  /** The last planned step's budget. */
  budget: StepBudget;
}

export interface ShardSchedulerOptions {
  /** This shard's index: requests queued here record it. */
  shard?: number;
  sequences: number;
  cellsPerSequence: number;
  /** Most tokens in one step (the runner's batch). */
  stepTokens: number;
  prefixCache: boolean;
  /** Most prompt tokens one request takes while other prompts wait for theirs (default 64). */
  chunkCap?: number;
  /** Prompt tokens every step carries at least while a prompt loads (default 8). */
  minChunk?: number;
  /** Per-tier targets (default: step-budget.ts DEFAULT_TARGETS). */
  targets?: TargetsByClass;
  /** How long a running request may go without progress before it fails with StalledError (default: never). */
  stallTimeoutMs?: number;
}

/** Requests of each tier in a list. */
export function countByClass(list: readonly EngineRequest[]): Record<SchedulingClass, number> {
  return {
    priority: list.filter((r) => r.schedulingClass === "priority").length,
    standard: list.filter((r) => r.schedulingClass === "standard").length,
    flex: list.filter((r) => r.schedulingClass === "flex").length,
    batch: list.filter((r) => r.schedulingClass === "batch").length,
  };
}
