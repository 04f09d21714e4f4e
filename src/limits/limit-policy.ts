import { RateLimited, ServiceError } from "../errors.js";
import { rateLimitHeaders, type RateLimitState, type WindowState } from "../protocol/rate-limit-headers.js";
import type { KeyLimits } from "../protocol/principal.js";
import type { LimitDefaults } from "./defaults.js";

/**
 * The limit rules both limiters follow (in-memory-limits.ts in-process, redis.ts in Lua), and everything about
 * a refusal that is not the atomic check-and-take itself: which limits apply, the Retry-After
 * arithmetic, and the messages. The Redis script returns the window it refused on, so the
 * Retry-After computed here is the same in both.
 *
 * Per-minute windows are a true sliding window of one minute, kept as 60 one-second buckets (not a
 * two-bucket approximation): a request or token counts from the second it was taken in until that
 * second is a full minute old. Bounded memory per key whatever the rate, and Retry-After is exact to
 * the bucket and never more than 60 seconds.
 */
export const BUCKET_MS = 1_000;
export const WINDOW_BUCKETS = 60;
export const WINDOW_MS = BUCKET_MS * WINDOW_BUCKETS;

/**
 * Redis concurrency leases expire after this long even if never released, so a crashed process
 * cannot hold slots forever. Longer than any request should run; leases are not refreshed.
 */
export const CONCURRENCY_LEASE_TTL_MS = 10 * 60_000;

/** What to tell a caller turned away for concurrency: a slot frees when any request ends. */
export const CONCURRENCY_RETRY_AFTER_SECONDS = 1;

export interface EffectiveLimits {
  concurrent: number;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
}

/** The key's own RPM/TPM where set, else the server defaults. */
export function effectiveLimits(limits: KeyLimits, defaults: LimitDefaults): EffectiveLimits {
  return {
    concurrent: defaults.concurrentPerAccountModel,
    requestsPerMinute: limits.requestsPerMinute ?? defaults.requestsPerMinute,
    tokensPerMinute: limits.tokensPerMinute ?? defaults.tokensPerMinute,
  };
}

export function bucketOf(nowMs: number): number {
  return Math.floor(nowMs / BUCKET_MS);
}

/** The oldest bucket still inside the window at `nowMs`; older ones no longer count. */
export function oldestLiveBucket(nowMs: number): number {
  return bucketOf(nowMs) - WINDOW_BUCKETS + 1;
}

/** A window's live buckets as [bucket, amount] pairs, in any order. */
export type WindowBuckets = ReadonlyArray<readonly [bucket: number, amount: number]>;

export function windowTotal(buckets: WindowBuckets, nowMs: number): number {
  const oldest = oldestLiveBucket(nowMs);
  let total = 0;
  for (const [bucket, amount] of buckets) if (bucket >= oldest) total += amount;
  return total;
}

/**
 * Milliseconds until `need` more fits under `limit`: the time at which enough of the oldest buckets
 * have aged out. Never more than the window; a need larger than the limit can never fit, and gets a
 * full window.
 */
export function retryAfterMs(buckets: WindowBuckets, limit: number, need: number, nowMs: number): number {
  if (need > limit) return WINDOW_MS;
  const oldest = oldestLiveBucket(nowMs);
  const live = buckets.filter(([bucket, amount]) => bucket >= oldest && amount > 0).sort((a, b) => a[0] - b[0]);
  let excess = live.reduce((sum, [, amount]) => sum + amount, 0) + need - limit;
  if (excess <= 0) return 0;
  for (const [bucket, amount] of live) {
    excess -= amount;
    // Bucket b counts while bucketOf(now) < b + WINDOW_BUCKETS.
    if (excess <= 0) return clamp((bucket + WINDOW_BUCKETS) * BUCKET_MS - nowMs, 0, WINDOW_MS);
  }
  return WINDOW_MS;
}

/**
 * A window as the rate-limit headers report it, from its total and its newest live bucket (-1 or
 * below the window: empty): everything in it has aged out once the newest bucket has.
 */
export function windowState(limit: number, used: number, newestBucket: number, nowMs: number): WindowState {
  const empty = used <= 0 || newestBucket < oldestLiveBucket(nowMs);
  return {
    limit,
    remaining: Math.max(0, limit - used),
    resetMs: empty ? 0 : clamp((newestBucket + WINDOW_BUCKETS) * BUCKET_MS - nowMs, 0, WINDOW_MS),
  };
}

/** The state of the windows a key has limits for, from each one's total and newest bucket. */
export function limitState(
  limits: EffectiveLimits,
  windows: { requests: [used: number, newest: number]; tokens: [used: number, newest: number] },
  nowMs: number,
): RateLimitState {
  return {
    ...(limits.requestsPerMinute !== null ? { requests: windowState(limits.requestsPerMinute, ...windows.requests, nowMs) } : {}),
    ...(limits.tokensPerMinute !== null ? { tokens: windowState(limits.tokensPerMinute, ...windows.tokens, nowMs) } : {}),
  };
}

export type RefusedLimit = "requests" | "tokens" | "concurrency";

export interface Refusal {
  limit: RefusedLimit;
  /** The limit in force. */
  max: number;
  /** How much of it is in use now. */
  used: number;
  /** How much this request asked for. */
  requested: number;
  /** The window it was refused on (requests and tokens only). */
  buckets?: WindowBuckets;
  nowMs: number;
  /** The key's windows as they stand (nothing was taken): the 429's rate-limit headers. */
  state?: RateLimitState;
}

/** The 429 for a refusal, with its Retry-After and an OpenAI-style message. */
export function refusalError(refusal: Refusal, request: { keyId: string; accountId: string; model: string }): ServiceError {
  const headers = rateLimitHeaders(refusal.state);
  if (refusal.limit === "concurrency") {
    return new RateLimited(
      `Too many concurrent requests for model '${request.model}' on this account: limit ${refusal.max}. ` +
        "Wait for a request in flight to finish, then retry.",
      CONCURRENCY_RETRY_AFTER_SECONDS,
      undefined,
      headers,
    );
  }
  const unit = refusal.limit === "requests" ? "requests per minute (RPM)" : "tokens per minute (TPM)";
  if (refusal.requested > refusal.max) {
    // No wait lets it pass, so no Retry-After; `x-should-retry: false` stops the OpenAI SDKs' automatic retries of a 429.
    return new ServiceError(
      429,
      "rate_limit_error",
      `Request too large for ${unit} on key ${request.keyId}: Limit ${refusal.max}, Requested ${refusal.requested}. ` +
        "It can never fit within the limit, so retrying will not help: reduce the prompt or max_tokens.",
      "request_too_large",
      null,
      { ...headers, "x-should-retry": "false" },
    );
  }
  const waitMs = retryAfterMs(refusal.buckets ?? [], refusal.max, refusal.requested, refusal.nowMs);
  return new RateLimited(
    `Rate limit reached for ${unit} on key ${request.keyId}: Limit ${refusal.max}, Used ${refusal.used}, Requested ${refusal.requested}. ` +
      `Please try again in ${Math.max(1, Math.ceil(waitMs / 1000))}s.`,
    waitMs / 1000,
    undefined,
    headers,
  );
}

/** Token counts from the caller: a non-negative safe integer, or a programming error. */
export function assertTokenCount(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`${what} must be a non-negative safe integer, got ${value}`);
  return value;
}

/**
 * release() must never throw for a bad count (the slot would leak): anything unusable charges the
 * estimate instead.
 */
export function releasedTokens(actual: number, estimate: number): number {
  return Number.isSafeInteger(actual) && actual >= 0 ? actual : estimate;
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, value));
}
