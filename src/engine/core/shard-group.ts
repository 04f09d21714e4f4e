import type { Shard, ShardGroupView } from "./shard.js";
import { StepGate } from "./step-gate.js";

/**
 * For this long after a priority request last ran or waited on one of a model's shards, every
 * shard's steps stay within priority's inter-token target. A closed-loop client sends its next
 * request just after a step began (its last token came out of the one before): after lower-tier
 * steps of 300 ms it waited 450 ms on average before its prompt could start (SmolLM2, 30
 * lower-tier clients beside it), and 115 ms with this.
 */
export const PRIORITY_LINGER_MS = 2000;

/**
 * A model's shards sharing the machine's cores: each step uses the cores no other busy shard uses
 * (one request alone decodes on all of them, 16 split them one per shard), and while a shard loads
 * a priority prompt, shards with no priority stream of their own hold between steps, so the prompt
 * runs on every core (a priority request's time to first token is its prefill).
 */
export class ShardGroup implements ShardGroupView {
  shards: Shard[] = [];
  readonly gate = new StepGate();

  constructor(private readonly threads: number) {}

  /** Threads a step may use now. */
  threadsFor = (): number => Math.max(1, Math.floor(this.threads / Math.max(1, this.shards.filter((s) => s.busy && !s.held).length)));

  /** Whether `shard` should skip its next step: another shard loads a priority prompt, and `shard` has no priority stream to keep. */
  holdFor = (shard: Shard): boolean =>
    !shard.scheduler.servingPriority && this.shards.some((other) => other !== shard && other.scheduler.rushing);

  /** The shards besides `shard`. */
  othersOf = (shard: Shard): Shard[] => this.shards.filter((other) => other !== shard);

  /** A priority request ran or waited on one of the shards a moment ago: every shard's steps stay short. */
  priorityNearby = (): boolean => this.shards.some((s) => performance.now() - s.scheduler.lastPriorityAt < PRIORITY_LINGER_MS);
}
