import { preemptibleByPriority } from "./policy.js";
import type { EngineRequest } from "./request.js";
import type { ShardScheduler } from "./scheduler.js";

/** What placement reads of a shard: its scheduler's queues, sequences and cache. */
type Shard = { readonly scheduler: ShardScheduler };

/**
 * The shard a new request goes to. A standard or flex request: the shard whose idle cache holds the
 * longest prefix of its prompt (where there is room), else the least loaded. A priority request goes
 * where it waits least: a shard that can admit it at its next step (free sequences, or lower tiers
 * to preempt), then a long cached prefix, then the fewest priority streams (each holds that
 * shard's steps to priority's target), then any cached prefix, then load.
 */
export function chooseShard<S extends Shard>(shards: readonly S[], request: EngineRequest): S {
  const score =
    request.tier === "priority" ? (shard: Shard) => priorityScore(shard, request) : (shard: Shard) => standardScore(shard, request);
  let chosen = shards[0]!;
  let best = score(chosen);
  for (const shard of shards.slice(1)) {
    const candidate = score(shard);
    if (better(candidate, best)) [chosen, best] = [shard, candidate];
  }
  return chosen;
}

/** Scores compare lexicographically: smaller is better. */
function better(a: number[], b: number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
}

const load = (shard: Shard) => (shard.scheduler.running.length + shard.scheduler.waiting.length) / shard.scheduler.sequenceCount;

/** Prefix first where the shard has room, then load (as scores: smaller is better). */
function standardScore(shard: Shard, request: EngineRequest): number[] {
  const roomy = load(shard) < 1;
  return [roomy ? -shard.scheduler.cachedPrefix(request) : 0, load(shard)];
}

/** Cached prompt tokens that outweigh the placement of a priority request by priority load. */
const LONG_CACHED_PREFIX = 64;

function priorityScore(shard: Shard, request: EngineRequest): number[] {
  const { running, waiting } = shard.scheduler;
  const priority = (list: EngineRequest[]) => list.filter((r) => r.tier === "priority").length;
  const admittable = shard.scheduler.freeSequences + preemptibleByPriority(running, shard.scheduler.sequenceCount) - priority(waiting) > 0;
  // A cached prefix worth more than a step's chunk (a conversation's next turn) saves more than
  // another shard's shorter steps would.
  const cached = shard.scheduler.cachedPrefix(request);
  return [admittable ? 0 : 1, cached > LONG_CACHED_PREFIX ? -cached : 0, priority(running) + priority(waiting), -cached, load(shard)];
}
