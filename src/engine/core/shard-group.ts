import { PRIORITY_LINGER_MS } from "./scheduler.js";
import type { Shard } from "./shard.js";

/**
 * A model's shards sharing the machine's cores: each step uses the cores no other busy shard uses
 * (one request alone decodes on all of them, 16 split them one per shard), and while a shard loads
 * a priority prompt, shards with no priority stream of their own hold between steps, so the prompt
 * runs on every core (a priority request's time to first token is its prefill).
 */
export class ShardGroup {
  shards: Shard[] = [];

  constructor(private readonly threads: number) {}

  /** Threads a step may use now. */
  threadsFor = (): number => Math.max(1, Math.floor(this.threads / Math.max(1, this.shards.filter((s) => s.busy && !s.held).length)));

  /** Whether `shard` should skip its next step: another shard loads a priority prompt, and `shard` has no priority stream to keep. */
  holdFor = (shard: Shard): boolean => !shard.scheduler.servingPriority && this.shards.some((other) => other !== shard && other.scheduler.rushing);

  /** The shards besides `shard`. */
  othersOf = (shard: Shard): Shard[] => this.shards.filter((other) => other !== shard);

  /** A priority request ran or waited on one of the shards a moment ago: every shard's steps stay short. */
  priorityNearby = (): boolean => this.shards.some((s) => performance.now() - s.scheduler.lastPriorityAt < PRIORITY_LINGER_MS);
}
