import { perTier, SERVICE_TIERS, tierTotal, type PerTier, type ServiceTier } from "../../protocol/tiers.js";
import { BackendBusy, BackendUnavailable, BackendWaitExpired } from "../backend.js";
import { rendezvousOrder, type Replica } from "./replica.js";

export interface PoolOptions {
  /** Requests that may wait at the gateway (all replicas together) before BackendBusy. */
  maxWaiting: number;
  /** How long a flex request waits for a free slot before BackendWaitExpired. */
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
  cleanup(): void;
}

/**
 * The replicas of one upstream model and the requests waiting for them. Each replica runs at most
 * its `maxConcurrency` requests; the rest wait in one queue in tier order (priority, then standard,
 * then flex; first come first served within a tier) and each freed slot goes to the first waiter
 * that may use it. A waiter goes to its affinity replica (the first of its rendezvous order among
 * the available replicas) when that one has a free slot, else to the least-loaded replica with one:
 * affinity never makes a request wait while another replica is idle.
 */
export class ReplicaPool {
  private readonly queues: PerTier<Waiter[]> = perTier(() => []);
  readonly runningByTier: PerTier<number> = perTier(() => 0);

  constructor(
    readonly replicas: readonly Replica[],
    private readonly options: PoolOptions,
  ) {}

  get waiting(): number {
    return tierTotal(this.waitingByTier());
  }

  waitingByTier(): PerTier<number> {
    return perTier((tier) => this.queues[tier].length);
  }

  /** Resolves with the replica the request may now send to (its slot taken); release it with `done`. */
  async acquire(claim: Claim, signal: AbortSignal): Promise<Replica> {
    const [replica] = await this.acquireAll({ ...claim, count: 1 }, signal);
    return replica!;
  }

  /** Resolves with `claim.count` slots at once (a replica may appear more than once); release each with `done`. */
  acquireAll(claim: Claim, signal: AbortSignal): Promise<Replica[]> {
    signal.throwIfAborted();
    if (this.waiting >= this.options.maxWaiting)
      return Promise.reject(new BackendBusy(`The queue for this model is full (${this.options.maxWaiting} waiting).`));
    return new Promise<Replica[]>((resolve, reject) => {
      const queue = this.queues[claim.tier];
      const onAbort = () => this.drop(waiter, signal.reason);
      const timer =
        claim.tier === "flex"
          ? setTimeout(
              () =>
                this.drop(
                  waiter,
                  new BackendWaitExpired(`No capacity for this flex request within ${Math.round(this.options.flexMaxWaitMs / 1000)} s.`),
                ),
              this.options.flexMaxWaitMs,
            )
          : undefined;
      const waiter: Waiter = {
        claim,
        resolve,
        reject,
        cleanup: () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
        },
      };
      signal.addEventListener("abort", onAbort, { once: true });
      queue.push(waiter);
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
    for (const tier of SERVICE_TIERS) {
      const queue = this.queues[tier];
      for (let i = 0; i < queue.length;) {
        const waiter = queue[i]!;
        const usable = this.replicas.filter((r) => r.available(now) && !waiter.claim.exclude.has(r));
        if (usable.length === 0 && !this.replicas.some((r) => !waiter.claim.exclude.has(r) && r.health === "up")) {
          queue.splice(i, 1);
          waiter.cleanup();
          waiter.reject(new BackendUnavailable(this.unavailableMessage(waiter.claim)));
          continue;
        }
        const count = waiter.claim.count ?? 1;
        // A down replica takes one trial request, however many slots it has.
        const freeSlots = usable.reduce(
          (n, r) => n + Math.min(r.health === "up" ? Infinity : 1, Math.max(0, r.maxConcurrency - r.running)),
          0,
        );
        if (freeSlots < count) {
          i++;
          continue;
        }
        queue.splice(i, 1);
        waiter.cleanup();
        const taken = Array.from({ length: count }, () => {
          const replica = choose(
            waiter.claim,
            usable.filter((r) => r.available(now)),
          )!;
          replica.take();
          return replica;
        });
        this.runningByTier[tier] += count;
        waiter.resolve(taken);
      }
    }
  }

  private drop(waiter: Waiter, reason: unknown): void {
    const queue = this.queues[waiter.claim.tier];
    const at = queue.indexOf(waiter);
    if (at === -1) return;
    queue.splice(at, 1);
    waiter.cleanup();
    waiter.reject(reason);
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
