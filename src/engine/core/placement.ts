import { adapterKeyOf, otherAdaptersOn } from "./adapter-turns.js";
import { preemptibleByPriority } from "./policy.js";
import type { EngineRequest } from "./request.js";
import type { ShardScheduler } from "./scheduler.js";
import { sequencesHeld } from "./scheduler-types.js";

/** What placement reads of a shard: its scheduler's queues, sequences and cache. */
type Shard = { readonly scheduler: ShardScheduler };

/**
 * The shard a new request goes to. A standard or flex request: among shards with room, one with no
 * request under another LoRA adapter (a step runs one adapter's requests, so shards of mixed
 * adapters take turns: core/adapter-turns.ts); while several adapters are in use (`keepEmpty`), a
 * shard already running the request's own before an empty one, which is kept for an adapter that
 * has no shard; then the one whose idle cache holds the longest prefix of its prompt (within its
 * share), then the least loaded. A priority request goes where it waits least: a
 * shard that can admit it at its next step (free sequences, or lower tiers to preempt), then the
 * fewest requests under other adapters, then a long cached prefix, then the fewest priority streams
 * (each holds that shard's steps to priority's target), then any cached prefix, then load.
 */
export function chooseShard<S extends Shard>(shards: readonly S[], request: EngineRequest, keepEmpty = false): S {
  const score =
    request.tier === "priority"
      ? (shard: Shard) => priorityScore(shard, request)
      : (shard: Shard) => standardScore(shard, request, keepEmpty);
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

const held = (shard: Shard) => sequencesHeld(shard.scheduler);
/** Requests on the shard over its share of the model's sequences (1: its share taken). */
const load = (shard: Shard) => held(shard) / shard.scheduler.share;

/**
 * Where the shard has room: other adapters' requests fewest; then, within its share, prefix; then
 * load (as scores: smaller is better). Room beyond the share (adapter room) only keeps adapters
 * apart: a cached prefix never piles a model's requests onto one shard.
 */
function standardScore(shard: Shard, request: EngineRequest, keepEmpty: boolean): number[] {
  const roomy = held(shard) < shard.scheduler.sequenceCount;
  const withinShare = load(shard) < 1;
  return [
    roomy ? otherAdaptersOn(shard.scheduler, adapterKeyOf(request)) : Infinity,
    keepEmpty && held(shard) === 0 ? 1 : 0,
    withinShare ? -shard.scheduler.cachedPrefix(request) : 0,
    load(shard),
  ];
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
  return [
    admittable ? 0 : 1,
    otherAdaptersOn(shard.scheduler, adapterKeyOf(request)),
    cached > LONG_CACHED_PREFIX ? -cached : 0,
    priority(running) + priority(waiting),
    -cached,
    load(shard),
  ];
}
