import { adapterGroups, otherAdaptersOn } from "./adapter-turns.js";
import type { EngineRequest } from "./request.js";
import { sequencesHeld } from "./scheduler-types.js";

/** What moves read of a shard: its queues and how many sequences it holds. */
interface MovableShard {
  readonly scheduler: {
    readonly running: readonly EngineRequest[];
    readonly waiting: readonly EngineRequest[];
    readonly sequenceCount: number;
  };
}

/**
 * Tokens a moved request may hold at most: it computes them again on its new shard (a prompt's worth
 * of prefill, about 0.3 s for SmolLM2 on one core at 256), against the turns it would otherwise
 * share with another adapter's group for the rest of its generation.
 */
export const MOVE_MAX_TOKENS = 512;

/**
 * A request that may move: one waiting that never ran (nothing of it is on its shard yet), or one
 * running with nothing tied to its shard's runner but its cells.
 */
function movable(request: EngineRequest): boolean {
  if (request.status === "waiting") return !request.started && request.siblings.length === 0 && !request.abortRequested;
  const seeded = request.spec.sampling.seed !== undefined && request.spec.sampling.temperature > 0;
  return (
    request.status === "running" &&
    request.tier !== "priority" && // its inter-token target has no room for a prefill
    !seeded && // its draws must stay the ones its seed gives
    request.siblings.length === 0 &&
    request.copyFrom === undefined &&
    !request.paused &&
    !request.abortRequested &&
    request.restoring === 0 &&
    request.moveTo === undefined &&
    !request.moved && // one move at most: arrivals can never make a request compute its tokens again and again
    request.tokens.length <= MOVE_MAX_TOKENS
  );
}

/**
 * Moves that leave each adapter's requests (or the base's) on shards of their own, where placement
 * could not (core/placement.ts: a group arriving while every shard held another's). On a shard whose
 * requests (running and waiting) are of several groups, groups move whole, the smallest first, to a
 * shard that holds only that group, or nothing, and has room for it, until one group is left; a
 * group with a request that cannot move stays (moving part of it would leave the shard mixed).
 * Returns each request and where it goes.
 */
export function separatingMoves<S extends MovableShard>(shards: readonly S[]): Array<{ request: EngineRequest; to: S }> {
  const moves: Array<{ request: EngineRequest; to: S }> = [];
  const incoming = new Map<S, { key: string; count: number }>();
  const takes = (shard: S, key: string, count: number) => {
    const planned = incoming.get(shard);
    // It holds only the group, or nothing, and no other group is on its way there.
    return otherAdaptersOn(shard.scheduler, key) === 0 && (planned?.key ?? key) === key && room(shard) - (planned?.count ?? 0) >= count;
  };
  for (const shard of shards) {
    const groups = [...adapterGroups([...shard.scheduler.running, ...shard.scheduler.waiting]).entries()].sort(
      ([, a], [, b]) => a.length - b.length,
    );
    let left = groups.length;
    for (const [key, group] of groups) {
      if (left === 1) break;
      if (!group.every(movable)) continue;
      const to = shards.find((other) => other !== shard && takes(other, key, group.length));
      if (!to) continue;
      incoming.set(to, { key, count: (incoming.get(to)?.count ?? 0) + group.length });
      for (const request of group) moves.push({ request, to });
      left--;
    }
  }
  return moves;
}

function room(shard: MovableShard): number {
  return shard.scheduler.sequenceCount - sequencesHeld(shard.scheduler);
}
