import { perTier, type PerTier, type ServiceTier } from "../../protocol/tiers.js";
import { TierQueue, type Verdict } from "../../engine/tier-queue.js";
import { BackendUnavailable } from "../backend.js";
import { rendezvousOrder, type Replica } from "./replica.js";

export interface PoolOptions {
  /** Requests that may wait at the gateway (all replicas together) before QueueFullError. */
  maxWaiting: number;
  /** How long a flex request waits for a free slot before WaitExpiredError. */
  flexMaxWaitMs: number;
}

export interface Claim {
  tier: ServiceTier;
  /** Requests with the same key prefer the same replica (prefix affinity); absent: least-loaded only. */
  affinityKey?: string;
  /** Replicas this request already failed on (a retry goes elsewhere). */
  exclude: ReadonlySet<Replica>;
  /**
   * Slots taken together (a request's `n` choices; default 1). All or none: choices that took
   * slots one by one could each hold part of what the others wait for, and none would ever start.
   */
  count?: number;
}

interface Waiter {
  claim: Claim;
  resolve(replicas: Replica[]): void;
  reject(error: unknown): void;
}

/**
 * The replicas of one upstream model and the requests waiting for them. Each replica runs at most
 * its `maxConcurrency` requests; the rest wait in one tier queue (engine/tier-queue.ts: priority,
 * then standard, then flex; first come first served within a tier; the cap and the flex wait the
 * embedded engine has) and each freed slot goes to the first waiter that may use it. A waiter goes
 * to its affinity replica (the first of its rendezvous order among the available replicas) when
 * that one has a free slot, else to the least-loaded replica with one: affinity never makes a
 * request wait while another replica is idle. Its refusals are the engine's (QueueFullError,
 * WaitExpiredError), which the upstream backend maps as the local engine's are.
 */
export class ReplicaPool {
  private readonly queue: TierQueue<Waiter>;
  readonly runningByTier: PerTier<number> = perTier(() => 0);

  constructor(
    readonly replicas: readonly Replica[],
    options: PoolOptions,
  ) {
    this.queue = new TierQueue({ ...options, unit: "requests" });
  }

  get waiting(): number {
    return this.queue.size;
  }

  waitingByTier(): PerTier<number> {
    return this.queue.sizeByTier();
  }

  /** Resolves with the replica the request may now send to (its slot taken); release it with `done`. */
  async acquire(claim: Claim, signal: AbortSignal): Promise<Replica> {
    const [replica] = await this.acquireAll({ ...claim, count: 1 }, signal);
    return replica!;
  }

  /** Resolves with `claim.count` slots at once (a replica may appear more than once); release each with `done`. */
  acquireAll(claim: Claim, signal: AbortSignal): Promise<Replica[]> {
    return new Promise<Replica[]>((resolve, reject) => {
      // A full queue or an aborted signal throws here, and so rejects.
      this.queue.enqueue(claim.tier, [{ claim, resolve, reject }], { signal, dropped: reject });
      this.dispatch();
    });
  }

  /** The request on `replica` ended; its slot goes to the next waiter. */
  done(replica: Replica, tier: ServiceTier, outcome: "ok" | "failed" | "neutral", fatal = false): void {
    replica.release(outcome, fatal);
    this.runningByTier[tier]--;
    this.dispatch();
  }

  /** Health may have changed (a check passed): waiters may now fit. */
  dispatch(): void {
    const now = Date.now();
    this.queue.take((waiter, tier) => this.serve(waiter, tier, now));
  }

  /** Gives the waiter its slots if they are free, or refuses it when no replica it may use is up; else it waits. */
  private serve(waiter: Waiter, tier: ServiceTier, now: number): Verdict {
    const { claim } = waiter;
    const usable = this.replicas.filter((r) => r.available(now) && !claim.exclude.has(r));
    if (usable.length === 0 && !this.replicas.some((r) => !claim.exclude.has(r) && r.health === "up")) {
      waiter.reject(new BackendUnavailable(this.unavailableMessage(claim)));
      return "take";
    }
    const count = claim.count ?? 1;
    // A down replica takes one trial request, however many slots it has.
    const freeSlots = usable.reduce((n, r) => n + Math.min(r.health === "up" ? Infinity : 1, Math.max(0, r.maxConcurrency - r.running)), 0);
    if (freeSlots < count) return "leave";
    const taken = Array.from({ length: count }, () => {
      const replica = choose(
        claim,
        usable.filter((r) => r.available(now)),
      )!;
      replica.take();
      return replica;
    });
    this.runningByTier[tier] += count;
    waiter.resolve(taken);
    return "take";
  }

  private unavailableMessage(claim: Claim): string {
    const tried = claim.exclude.size;
    return tried > 0
      ? `All ${this.replicas.length} upstream replicas of this model failed this request (${tried} tried).`
      : `No upstream replica of this model is reachable.`;
  }
}

/** The affinity replica if it has a free slot, else the least-loaded one with a free slot (none: wait). */
function choose(claim: Claim, usable: readonly Replica[]): Replica | undefined {
  const free = usable.filter((r) => r.hasFreeSlot);
  if (free.length === 0) return undefined;
  if (claim.affinityKey !== undefined) {
    const preferred = rendezvousOrder(claim.affinityKey, usable)[0]!;
    if (preferred.hasFreeSlot) return preferred;
  }
  return free.reduce((best, r) => (r.running / r.maxConcurrency < best.running / best.maxConcurrency ? r : best));
}
