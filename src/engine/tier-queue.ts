/**
 * The waiting line every tier-scheduled queue shares: one FIFO per service tier, served in
 * SERVICE_TIERS order, a cap on what may wait, flex waits that expire, and waiters that leave when
 * their caller aborts. The upstream gateway's replica pool and an embedding model's input queue are
 * TierQueues; a chat model's requests wait in its shards' schedulers (whose order is the tier
 * policy's), so its router shares only the cap and the flex wait (`refuseWhenFull`, `startFlexWait`).
 * Whoever takes from the queue keeps its own rule of what fits (free slots, a batch's tokens).
 */
import { perTier, SERVICE_TIERS, tierTotal, type PerTier, type ServiceTier } from "../protocol/tiers.js";
import { QueueFullError, WaitExpiredError } from "./errors.js";

export interface QueueCap {
  /** Items that may wait at once; one more is refused with QueueFullError. */
  maxWaiting: number;
  /** What waits, for the queue-full message. */
  unit: "requests" | "inputs";
}

/** The one queue-full refusal: `adding` more items would take `waiting` past the cap. */
export function refuseWhenFull(waiting: number, adding: number, cap: QueueCap): void {
  if (waiting + adding > cap.maxWaiting) {
    const unit = cap.maxWaiting === 1 ? cap.unit.slice(0, -1) : cap.unit;
    throw new QueueFullError(`The queue for this model is full (${cap.maxWaiting} ${unit} waiting).`);
  }
}

/**
 * Starts a flex request's wait: once `flexMaxWaitMs` passes, `expire` gets the one WaitExpiredError
 * (the wait is over for good: flex runs only on capacity that is free soon). Other tiers, or no
 * limit, never expire. Returns what stops the wait, for when the request is admitted or gone.
 */
export function startFlexWait(tier: ServiceTier, flexMaxWaitMs: number | undefined, expire: (error: WaitExpiredError) => void): () => void {
  if (tier !== "flex" || flexMaxWaitMs === undefined) return () => {};
  const message = `No capacity for this flex request within ${Math.round(flexMaxWaitMs / 1000)} s.`;
  const timer = setTimeout(() => expire(new WaitExpiredError(message)), flexMaxWaitMs);
  return () => clearTimeout(timer);
}

export interface TierQueueOptions extends QueueCap {
  /** How long a flex group may wait before it is dropped with WaitExpiredError; absent: as long as any other. */
  flexMaxWaitMs?: number;
}

/** How a group of items, queued together, leaves the queue other than by being taken. */
export interface GroupExits {
  /** When it aborts, the group's waiting items are dropped with the signal's reason. */
  signal?: AbortSignal;
  /** Called at most once, when the group's waiting items are dropped: the abort's reason, or the flex wait's WaitExpiredError. */
  dropped(reason: unknown): void;
}

/** A group's place in the queue. */
export interface Place {
  /** Takes the group's still-waiting items out, without `dropped`: its owner settled it some other way. */
  withdraw(): void;
}

/** What a taker says of one waiting item: take it out now, leave it waiting, or look no further. */
export type Verdict = "take" | "leave" | "stop";

interface Group {
  tier: ServiceTier;
  /** Its items still in the queue; 0 once all are taken, or the group was dropped or withdrawn. */
  waiting: number;
  /** Stops its flex wait and abort listener. */
  stopExits(): void;
}

interface Entry<T> {
  item: T;
  group: Group;
}

/**
 * Items waiting in tier order, first come first served within a tier. Items queued together (one
 * request's inputs) are a group: admitted all or none against the cap, and dropped together when
 * their signal aborts or their flex wait ends. A group's flex wait and abort listener stop once its
 * last item is taken. Dropped items are forgotten at once (`size` leaves them out) and swept out of
 * their line on the next visit, so dropping costs nothing in proportion to the queue.
 */
export class TierQueue<T> {
  private readonly lines: PerTier<Entry<T>[]> = perTier(() => []);
  /** Each tier's items still waiting (its line may also hold dropped ones not yet swept). */
  private readonly counts: PerTier<number> = perTier(() => 0);

  constructor(private readonly options: TierQueueOptions) {}

  get size(): number {
    return tierTotal(this.counts);
  }

  sizeByTier(): PerTier<number> {
    return { ...this.counts };
  }

  /** Queues `items` at the end of `tier`'s line, all or none: throws QueueFullError past the cap, or the reason of a signal already aborted. */
  enqueue(tier: ServiceTier, items: readonly T[], exits: GroupExits): Place {
    exits.signal?.throwIfAborted();
    refuseWhenFull(this.size, items.length, this.options);
    if (items.length === 0) return { withdraw: () => {} };
    const group: Group = { tier, waiting: items.length, stopExits: () => {} };
    const drop = (reason: unknown) => {
      if (this.remove(group)) exits.dropped(reason);
    };
    const stopFlexWait = startFlexWait(tier, this.options.flexMaxWaitMs, drop);
    const signal = exits.signal;
    const onAbort = () => drop(signal!.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    group.stopExits = () => {
      stopFlexWait();
      signal?.removeEventListener("abort", onAbort);
    };
    // One at a time: a request may bring thousands of inputs, too many to spread into one call.
    for (const item of items) this.lines[tier].push({ item, group });
    this.counts[tier] += items.length;
    return { withdraw: () => void this.remove(group) };
  }

  /**
   * Offers each waiting item to `decide`, priority's first, oldest first within a tier, and takes
   * out the ones it says "take" to (before the next is offered, so `decide` may act on each as it
   * goes: take a slot, add to a batch); "stop" ends the visit. Returns the items taken, in order.
   */
  take(decide: (item: T, tier: ServiceTier) => Verdict): T[] {
    const taken: T[] = [];
    for (const tier of SERVICE_TIERS) {
      const line = this.lines[tier];
      for (let i = 0; i < line.length;) {
        const { item, group } = line[i]!;
        if (group.waiting === 0) {
          line.splice(i, 1); // dropped or withdrawn: swept now
          continue;
        }
        const verdict = decide(item, tier);
        if (verdict === "stop") return taken;
        if (verdict === "leave") {
          i++;
          continue;
        }
        line.splice(i, 1);
        this.counts[tier]--;
        if (--group.waiting === 0) group.stopExits();
        taken.push(item);
      }
    }
    return taken;
  }

  /** Empties the queue (shutting down): every group's exits stop, none is `dropped`; returns what waited, in tier order. */
  clear(): T[] {
    const waiting = SERVICE_TIERS.flatMap((tier) => this.lines[tier].filter((entry) => entry.group.waiting > 0));
    for (const { group } of waiting) this.remove(group);
    for (const tier of SERVICE_TIERS) this.lines[tier].length = 0;
    return waiting.map((entry) => entry.item);
  }

  /** Forgets the group's waiting items; false when none were left (all taken, or already removed). */
  private remove(group: Group): boolean {
    if (group.waiting === 0) return false;
    this.counts[group.tier] -= group.waiting;
    group.waiting = 0;
    group.stopExits();
    return true;
  }
}
