/**
 * Failed admin-key attempts per client IP. After `maxFailures` failures within `lockoutMs` of the
 * first, the IP is locked out for `lockoutMs`: every admin request from it is refused, the right key
 * included, so a guesser gets `maxFailures` tries per period instead of hundreds a second. A success
 * clears the IP's count; a lockout ends by itself.
 *
 * In this process's memory: each server counts its own, and a restart forgets. Behind a reverse
 * proxy every client has the proxy's address and shares one count.
 */
export interface AdminThrottleOptions {
  maxFailures: number;
  lockoutMs: number;
  /** IPs tracked at most; the longest-tracked is dropped beyond it, so a flood of addresses cannot grow memory. */
  maxTracked?: number;
}

interface Attempts {
  failures: number;
  firstFailureAt: number;
  lockedUntil: number;
}

export const DEFAULT_ADMIN_THROTTLE: AdminThrottleOptions = { maxFailures: 10, lockoutMs: 60_000 };

export class AdminThrottle {
  private readonly attempts = new Map<string, Attempts>();
  private readonly maxTracked: number;

  constructor(
    private readonly options: AdminThrottleOptions = DEFAULT_ADMIN_THROTTLE,
    private readonly now: () => number = Date.now,
  ) {
    this.maxTracked = options.maxTracked ?? 10_000;
  }

  /** Milliseconds until `ip` may try again, or 0 when it may now. */
  lockedFor(ip: string): number {
    const entry = this.attempts.get(ip);
    return entry ? Math.max(0, entry.lockedUntil - this.now()) : 0;
  }

  failed(ip: string): void {
    const now = this.now();
    let entry = this.attempts.get(ip);
    if (!entry || now - entry.firstFailureAt >= this.options.lockoutMs) {
      entry = { failures: 0, firstFailureAt: now, lockedUntil: 0 };
      this.attempts.delete(ip); // re-inserted last: Map order is how long an IP has been tracked
      this.attempts.set(ip, entry);
      this.evictOldest();
    }
    entry.failures += 1;
    if (entry.failures >= this.options.maxFailures) {
      entry.lockedUntil = now + this.options.lockoutMs;
      // The next period starts when the lockout ends.
      entry.firstFailureAt = entry.lockedUntil;
      entry.failures = 0;
    }
  }

  succeeded(ip: string): void {
    this.attempts.delete(ip);
  }

  private evictOldest(): void {
    while (this.attempts.size > this.maxTracked) {
      const oldest = this.attempts.keys().next().value;
      if (oldest === undefined) return;
      this.attempts.delete(oldest);
    }
  }
}
