import type { RateLimitState } from "../protocol/rate-limit-headers.js";
import type { KeyLimits } from "../protocol/principal.js";

/** What the request lifecycle needs from limits: a key's stored limits, and admission under them. */

export interface LimitLease {
  /** Frees the concurrency slot and charges the tokens actually used against the per-minute window. */
  release(actualTokens: number): Promise<void>;
  /** The key's per-minute windows right after this request was taken (the rate-limit headers). */
  readonly state?: RateLimitState;
}

export interface RequestLimits {
  /**
   * Checks requests/minute and tokens/minute for the key and takes a concurrency slot for
   * (account, model). Throws RateLimited (429 with Retry-After) when over a limit, or a 429 `request_too_large` without one when the request alone is more than the limit.
   */
  admit(request: { accountId: string; keyId: string; model: string; estimatedTokens: number; limits: KeyLimits }): Promise<LimitLease>;
  /** The key's per-minute windows as they stand, taking nothing (the rate-limit headers of other responses); {} when it has no limit. */
  peek?(request: { keyId: string; limits: KeyLimits }): Promise<RateLimitState>;
}
