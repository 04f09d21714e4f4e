import type { LimitLease, RequestLimits } from "./ports.js";
import type { LimitDefaults } from "./defaults.js";
import {
  assertTokenCount,
  bucketOf,
  effectiveLimits,
  oldestLiveBucket,
  refusalError,
  releasedTokens,
  WINDOW_MS,
  type Refusal,
} from "./policy.js";

export interface MemoryLimitsOptions {
  /** Milliseconds since the epoch; tests move time forward with it. */
  now?: () => number;
}

/**
 * Request limits held in this process: right for a single server. Node runs admit() start to end
 * without yielding, so check-and-take is atomic without locks. Windows follow policy.ts (a sliding
 * minute of one-second buckets).
 */
export function createMemoryLimits(defaults: LimitDefaults, options: MemoryLimitsOptions = {}): RequestLimits {
  return new MemoryLimits(defaults, options.now ?? Date.now);
}

class MemoryLimits implements RequestLimits {
  private readonly requestWindows = new Map<string, SlidingWindow>();
  private readonly tokenWindows = new Map<string, SlidingWindow>();
  private readonly inFlight = new Map<string, number>();
  private lastSweep: number;

  constructor(
    private readonly defaults: LimitDefaults,
    private readonly now: () => number,
  ) {
    this.lastSweep = now();
  }

  async admit(request: Parameters<RequestLimits["admit"]>[0]): Promise<LimitLease> {
    const limits = effectiveLimits(request.limits, this.defaults);
    const estimate = assertTokenCount(request.estimatedTokens, "estimatedTokens");
    const nowMs = this.now();
    this.sweep(nowMs);
    const slotKey = `${request.accountId}\u0000${request.model}`;

    const refuse = (refusal: Omit<Refusal, "nowMs">): never => {
      throw refusalError({ ...refusal, nowMs }, request);
    };
    if (limits.requestsPerMinute !== null) {
      const window = windowOf(this.requestWindows, request.keyId);
      const used = window.prune(nowMs);
      if (used + 1 > limits.requestsPerMinute) refuse({ limit: "requests", max: limits.requestsPerMinute, used, requested: 1, buckets: window.entries() });
    }
    if (limits.tokensPerMinute !== null) {
      const window = windowOf(this.tokenWindows, request.keyId);
      const used = window.prune(nowMs);
      if (used + estimate > limits.tokensPerMinute) refuse({ limit: "tokens", max: limits.tokensPerMinute, used, requested: estimate, buckets: window.entries() });
    }
    const running = this.inFlight.get(slotKey) ?? 0;
    if (running >= limits.concurrent) refuse({ limit: "concurrency", max: limits.concurrent, used: running, requested: 1 });

    // Everything fits: take it all (nothing above has yielded, so nothing changed in between).
    const admittedBucket = bucketOf(nowMs);
    if (limits.requestsPerMinute !== null) windowOf(this.requestWindows, request.keyId).add(admittedBucket, 1);
    const chargesTokens = limits.tokensPerMinute !== null;
    if (chargesTokens) windowOf(this.tokenWindows, request.keyId).add(admittedBucket, estimate);
    this.inFlight.set(slotKey, running + 1);
    return this.lease(slotKey, request.keyId, chargesTokens ? { admittedBucket, estimate } : null);
  }

  /** Frees the slot once; `charged`: the estimate taken from the key's token window, replaced by the actual count. */
  private lease(slotKey: string, keyId: string, charged: { admittedBucket: number; estimate: number } | null): LimitLease {
    let released = false;
    return {
      release: async (actualTokens) => {
        if (released) return;
        released = true;
        const left = (this.inFlight.get(slotKey) ?? 1) - 1;
        if (left > 0) this.inFlight.set(slotKey, left);
        else this.inFlight.delete(slotKey);
        if (!charged) return;
        // The estimate leaves the bucket it went into; the actual usage counts from now.
        const releasedAt = this.now();
        const window = windowOf(this.tokenWindows, keyId);
        if (charged.admittedBucket >= oldestLiveBucket(releasedAt)) window.add(charged.admittedBucket, -charged.estimate);
        window.add(bucketOf(releasedAt), releasedTokens(actualTokens, charged.estimate));
      },
    };
  }

  /** Drops the windows of keys idle for a minute, so memory follows the active keys, not every key ever seen. */
  private sweep(nowMs: number): void {
    if (nowMs - this.lastSweep < WINDOW_MS) return;
    this.lastSweep = nowMs;
    for (const windows of [this.requestWindows, this.tokenWindows]) {
      for (const [keyId, window] of windows) if (window.prune(nowMs) === 0) windows.delete(keyId);
    }
  }
}

function windowOf(windows: Map<string, SlidingWindow>, keyId: string): SlidingWindow {
  let window = windows.get(keyId);
  if (!window) windows.set(keyId, (window = new SlidingWindow()));
  return window;
}

class SlidingWindow {
  private readonly buckets = new Map<number, number>();

  /** Forgets buckets that have left the window; returns what is left in it. */
  prune(nowMs: number): number {
    const oldest = oldestLiveBucket(nowMs);
    let total = 0;
    for (const [bucket, amount] of this.buckets) {
      if (bucket < oldest) this.buckets.delete(bucket);
      else total += amount;
    }
    return total;
  }

  add(bucket: number, amount: number): void {
    const next = (this.buckets.get(bucket) ?? 0) + amount;
    if (next > 0) this.buckets.set(bucket, next);
    else this.buckets.delete(bucket);
  }

  entries(): Array<[number, number]> {
    return [...this.buckets];
  }
}
