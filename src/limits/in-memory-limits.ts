import type { LimitLease, RequestLimits } from "./ports.js";
import type { LimitDefaults } from "./defaults.js";
import {
  assertTokenCount,
  bucketOf,
  effectiveLimits,
  limitState,
  oldestLiveBucket,
  refusalError,
  releasedTokens,
  WINDOW_MS,
  type Refusal,
} from "./limit-policy.js";

export interface MemoryLimitsOptions {
  /** Milliseconds since the epoch; tests move time forward with it. */
  now?: () => number;
}

/**
 * Request limits held in this process: right for a single server. Node runs admit() start to end
 * without yielding, so check-and-take is atomic without locks. Windows follow limit-policy.ts (a sliding
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

  async peek(request: Parameters<NonNullable<RequestLimits["peek"]>>[0]) {
    const limits = effectiveLimits(request.limits, this.defaults);
    const nowMs = this.now();
    const look = (windows: Map<string, SlidingWindow>): [number, number] => {
      const window = windows.get(request.keyId);
      return window ? [window.prune(nowMs), window.newest(-1)] : [0, -1];
    };
    return limitState(limits, { requests: look(this.requestWindows), tokens: look(this.tokenWindows) }, nowMs);
  }

  async admit(request: Parameters<RequestLimits["admit"]>[0]): Promise<LimitLease> {
    const limits = effectiveLimits(request.limits, this.defaults);
    const estimate = assertTokenCount(request.estimatedTokens, "estimatedTokens");
    const nowMs = this.now();
    this.sweep(nowMs);
    const slotKey = `${request.accountId}\u0000${request.model}`;

    const requests = limits.requestsPerMinute === null ? null : windowOf(this.requestWindows, request.keyId);
    const tokens = limits.tokensPerMinute === null ? null : windowOf(this.tokenWindows, request.keyId);
    const requestsUsed = requests?.prune(nowMs) ?? 0;
    const tokensUsed = tokens?.prune(nowMs) ?? 0;
    // The windows as the rate-limit headers show them, after taking `taken`.
    const state = (taken: { requests: number; tokens: number }) =>
      limitState(
        limits,
        {
          requests: [requestsUsed + taken.requests, requests?.newest(taken.requests > 0 ? bucketOf(nowMs) : -1) ?? -1],
          tokens: [tokensUsed + taken.tokens, tokens?.newest(taken.tokens > 0 ? bucketOf(nowMs) : -1) ?? -1],
        },
        nowMs,
      );
    const refuse = (refusal: Omit<Refusal, "nowMs" | "state">): never => {
      throw refusalError({ ...refusal, nowMs, state: state({ requests: 0, tokens: 0 }) }, request);
    };
    if (requests && requestsUsed + 1 > limits.requestsPerMinute!)
      refuse({ limit: "requests", max: limits.requestsPerMinute!, used: requestsUsed, requested: 1, buckets: requests.entries() });
    if (tokens && tokensUsed + estimate > limits.tokensPerMinute!)
      refuse({ limit: "tokens", max: limits.tokensPerMinute!, used: tokensUsed, requested: estimate, buckets: tokens.entries() });
    const running = this.inFlight.get(slotKey) ?? 0;
    if (running >= limits.concurrent) refuse({ limit: "concurrency", max: limits.concurrent, used: running, requested: 1 });

    // Everything fits: take it all (nothing above has yielded, so nothing changed in between).
    const admittedBucket = bucketOf(nowMs);
    const admittedState = state({ requests: 1, tokens: estimate });
    requests?.add(admittedBucket, 1);
    tokens?.add(admittedBucket, estimate);
    this.inFlight.set(slotKey, running + 1);
    return { ...this.lease(slotKey, request.keyId, tokens ? { admittedBucket, estimate } : null), state: admittedState };
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

  /** The newest bucket holding anything, or `atLeast` if that is newer. Call after prune(). */
  newest(atLeast: number): number {
    let newest = atLeast;
    for (const bucket of this.buckets.keys()) if (bucket > newest) newest = bucket;
    return newest;
  }

  entries(): Array<[number, number]> {
    return [...this.buckets];
  }
}
