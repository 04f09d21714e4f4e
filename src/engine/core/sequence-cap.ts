import type { EngineRequest } from "./request.js";

/** What the cap reads of a shard: its running and waiting requests, and how to wake its loop. */
interface CappedShard {
  readonly scheduler: { readonly running: readonly EngineRequest[]; readonly waiting: readonly EngineRequest[] };
  wake(): void;
}

/**
 * A model's cap on requests running at once over all its shards. Shards may hold more sequences
 * than their share of it (room, so that placement can keep each LoRA adapter's requests on shards
 * of their own: core/placement.ts); the cap keeps the model's `sequences` setting what it says, the
 * requests decoded together. Without room it never binds.
 */
export class SequenceCap {
  constructor(
    readonly limit: number,
    private readonly shards: () => readonly CappedShard[],
  ) {}

  /** Requests the model may still admit, on any shard. */
  get free(): number {
    let running = 0;
    for (const shard of this.shards()) running += shard.scheduler.running.length;
    return Math.max(0, this.limit - running);
  }

  /** A request gave its sequence up: shards with requests waiting look again (the cap may have held them). */
  released(): void {
    for (const shard of this.shards()) if (shard.scheduler.waiting.length > 0) shard.wake();
  }
}

/** No cap beyond each shard's own sequences (a scheduler on its own, as in the unit tests). */
export const UNCAPPED = { free: Infinity, released: () => {} } as const;

/** What a scheduler reads of the model's cap. */
export type ModelCap = Pick<SequenceCap, "free" | "released">;
