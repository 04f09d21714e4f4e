import type { EngineRequest } from "./request.js";
import { TIER_RANK } from "../../protocol/tiers.js";

/**
 * Steps a group of running requests under one adapter (or the base) may be passed over before it
 * goes next whatever the other groups' tiers: the most demanding group never stops a cheaper one.
 */
export const MAX_PASSED_STEPS = 2;

/**
 * Steps a group keeps its turn for where every group's most demanding tier is the same and is not
 * priority. llama.cpp reserves its compute graphs again whenever a context's adapters change
 * (sched_reserve), so turns of one step pay that every step: about 19 ms a switch beside steps of
 * 36-50 ms (SmolLM2, 2 one-thread shards, half base and half adapter). Measured there at c16 (bench
 * adapter-mix, 2026-11-28): turns of 1, 2, 4 and 8 steps kept 0.46-0.49, 0.58, 0.61 and 0.65 of
 * base-only throughput, with ITL p99 of 420-480, 430-540, 470-620 and 480-1,040 ms. Priority streams
 * keep turns of one step (their inter-token target); so do groups of unequal tiers.
 */
export const TURN_STEPS = 4;

/** The adapter a request runs under: its key, "" for the base model. */
export const adapterKeyOf = (request: EngineRequest) => request.adapter?.key ?? "";

/** Requests grouped by the adapter they run under, in their order. */
export function adapterGroups(requests: readonly EngineRequest[]): Map<string, EngineRequest[]> {
  const groups = new Map<string, EngineRequest[]>();
  for (const request of requests) {
    const key = adapterKeyOf(request);
    const group = groups.get(key);
    if (group) group.push(request);
    else groups.set(key, [request]);
  }
  return groups;
}

/** Requests a shard holds, running or waiting, under another adapter than `key` (or the base model). */
export function otherAdaptersOn(
  scheduler: { readonly running: readonly EngineRequest[]; readonly waiting: readonly EngineRequest[] },
  key: string,
): number {
  let count = 0;
  for (const request of scheduler.running) if (adapterKeyOf(request) !== key) count++;
  for (const request of scheduler.waiting) if (adapterKeyOf(request) !== key) count++;
  return count;
}

/**
 * llama.cpp applies LoRA adapters per context, to the whole batch, so a step runs the sequences of
 * one adapter (or of the base alone). With several adapters running on a shard, groups take turns:
 * a group passed over for MAX_PASSED_STEPS steps goes next (the longest waiting first); otherwise
 * the group whose most demanding request has the most demanding tier, then the one served least
 * recently. Where all groups' most demanding tiers are equal and below priority, a turn lasts
 * TURN_STEPS steps (groups then go round in turn). Within a step the batch keeps the scheduler's
 * tier order.
 */
export class AdapterTurns {
  private steps = 0;
  /** The step each adapter group last ran in. */
  private readonly lastRan = new Map<string, number>();
  /** The group whose turn runs, and the steps left of it. */
  private turn: { key: string; left: number } | undefined;

  /** `ordered`: the runnable requests in batch order. Returns the chosen group's requests and whether others were left out. */
  choose(ordered: readonly EngineRequest[]): { chosen: readonly EngineRequest[]; leftOut: boolean } {
    // Every step comes here: with no adapter running (the usual case) nothing is grouped or copied.
    if (!ordered.some((request) => request.adapter !== undefined)) return { chosen: ordered, leftOut: false };
    const groups = adapterGroups(ordered);
    if (groups.size <= 1) return { chosen: ordered, leftOut: false };
    const step = ++this.steps;
    const waited = (key: string) => step - (this.lastRan.get(key) ?? 0);
    const rank = (key: string) => Math.min(...groups.get(key)!.map((r) => TIER_RANK[r.tier]));
    const keys = [...groups.keys()];
    const ranks = keys.map(rank);
    const even = ranks.every((r) => r === ranks[0]) && ranks[0]! > TIER_RANK.priority;
    let key: string;
    if (even && this.turn && this.turn.left > 0 && groups.has(this.turn.key)) {
      key = this.turn.key;
      this.turn.left--;
    } else {
      const overdue = keys.filter((k) => waited(k) > MAX_PASSED_STEPS).sort((a, b) => waited(b) - waited(a));
      key = overdue[0] ?? keys.sort((a, b) => rank(a) - rank(b) || waited(b) - waited(a))[0]!;
      this.turn = { key, left: even ? TURN_STEPS - 1 : 0 };
    }
    this.lastRan.set(key, step);
    for (const other of this.lastRan.keys()) if (!groups.has(other) && other !== key) this.lastRan.delete(other);
    return { chosen: groups.get(key)!, leftOut: true };
  }
}
