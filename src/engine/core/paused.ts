import type { EngineRequest } from "./request.js";

/**
 * Requests whose caller is not reading their output (a stream's client that stopped reading). For
 * a grace period a paused request keeps its sequence, out of every batch, so a reader that comes
 * back at once loses nothing; past it, the scheduler preempts it like a lower tier, and it waits
 * in the queue without being admitted or counted as load until its reader returns.
 */

/** Running requests paused for the grace period or longer: the scheduler preempts them. */
export function pausedPastGrace(running: readonly EngineRequest[], graceMs: number, now = performance.now()): EngineRequest[] {
  return running.filter((r) => r.paused && !r.abortRequested && now - r.pausedAt >= graceMs);
}

/** The waiting requests that may be admitted: a paused one waits for its reader, not for a sequence. */
export function admissible(waiting: readonly EngineRequest[]): EngineRequest[] {
  return waiting.filter((r) => !r.paused);
}

/** Paused requests, running (in their grace period) or waiting for their reader. */
export function pausedCount(running: readonly EngineRequest[], waiting: readonly EngineRequest[]): number {
  return running.filter((r) => r.paused).length + waiting.filter((r) => r.paused).length;
}

/** How long until the first running paused request's grace period ends (undefined: none is paused). */
export function untilGraceEnds(running: readonly EngineRequest[], graceMs: number, now = performance.now()): number | undefined {
  const paused = running.filter((r) => r.paused);
  if (paused.length === 0 || !Number.isFinite(graceMs)) return undefined;
  return Math.max(10, Math.min(...paused.map((r) => r.pausedAt + graceMs - now)));
}
