import type { EngineRequest } from "./request.js";
import { TIER_RANK } from "../../protocol/tiers.js";

/**
 * Steps a group of running requests under one adapter (or the base) may be passed over before it
 * goes next whatever the other groups' tiers: the most demanding group never stops a cheaper one.
 */
export const MAX_PASSED_STEPS = 2;

/** The adapter a request runs under: its key, "" for the base model. */
export const adapterKeyOf = (request: EngineRequest) => request.adapter?.key ?? "";

/**
 * llama.cpp applies LoRA adapters per context, to the whole batch, so a step runs the sequences of
 * one adapter (or of the base alone). With several adapters running on a shard, groups take turns:
 * a group passed over for MAX_PASSED_STEPS steps goes next (the longest waiting first); otherwise
 * the group whose most demanding request has the most demanding tier, then the one served least
 * recently. Within a step the batch keeps the scheduler's tier order.
 */
export class AdapterTurns {
  private steps = 0;
  /** The step each adapter group last ran in. */
  private readonly lastRan = new Map<string, number>();

  /** `ordered`: the runnable requests in batch order. Returns the chosen group's requests and whether others were left out. */
  choose(ordered: readonly EngineRequest[]): { chosen: readonly EngineRequest[]; leftOut: boolean } {
    // Every step comes here: with no adapter running (the usual case) nothing is grouped or copied.
    if (!ordered.some((request) => request.adapter !== undefined)) return { chosen: ordered, leftOut: false };
    const groups = new Map<string, EngineRequest[]>();
    for (const request of ordered) {
      const key = adapterKeyOf(request);
      const group = groups.get(key);
      if (group) group.push(request);
      else groups.set(key, [request]);
    }
    if (groups.size <= 1) return { chosen: ordered, leftOut: false };
    const step = ++this.steps;
    const waited = (key: string) => step - (this.lastRan.get(key) ?? 0);
    const rank = (key: string) => Math.min(...groups.get(key)!.map((r) => TIER_RANK[r.tier]));
    const keys = [...groups.keys()];
    const overdue = keys.filter((key) => waited(key) > MAX_PASSED_STEPS).sort((a, b) => waited(b) - waited(a));
    const key = overdue[0] ?? keys.sort((a, b) => rank(a) - rank(b) || waited(b) - waited(a))[0]!;
    this.lastRan.set(key, step);
    for (const other of this.lastRan.keys()) if (!groups.has(other) && other !== key) this.lastRan.delete(other);
    return { chosen: groups.get(key)!, leftOut: true };
  }
}
