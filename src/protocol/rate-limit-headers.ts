/**
 * OpenAI's rate-limit headers: for each per-minute limit a key has, its size, what is left of it
 * after this request, and how long until all of its use has aged out of the window (as OpenAI's
 * `x-ratelimit-reset-*`, a duration such as `17ms`, `6s` or `1m0s`). Windows without a limit send none.
 */
export interface WindowState {
  limit: number;
  remaining: number;
  /** Milliseconds until the window holds nothing of what was taken so far. */
  resetMs: number;
}

export interface RateLimitState {
  requests?: WindowState;
  tokens?: WindowState;
}

export const RATE_LIMIT_HEADER_NAMES = ["requests", "tokens"].flatMap((kind) =>
  ["limit", "remaining", "reset"].map((part) => `x-ratelimit-${part}-${kind}`),
);

export function rateLimitHeaders(state: RateLimitState | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const kind of ["requests", "tokens"] as const) {
    const window = state?.[kind];
    if (!window) continue;
    headers[`x-ratelimit-limit-${kind}`] = String(window.limit);
    headers[`x-ratelimit-remaining-${kind}`] = String(Math.max(0, window.remaining));
    headers[`x-ratelimit-reset-${kind}`] = duration(window.resetMs);
  }
  return headers;
}

/** `850ms`, `6s`, `1m0s`: whole seconds rounded up past one second, so a client never waits too little. */
export function duration(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole < 1000) return `${whole}ms`;
  const seconds = Math.ceil(whole / 1000);
  return seconds < 60 ? `${seconds}s` : `${Math.floor(seconds / 60)}m${seconds % 60}s`;
}
