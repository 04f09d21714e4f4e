import type { Caller } from "../protocol/principal.js";
import type { RateLimitState } from "../protocol/rate-limit-headers.js";
import type { RequestLimits } from "./ports.js";

/**
 * A request that uses no tokens (an upload, a token count) taken against the key's requests per
 * minute, as any request is: a 429 over the limit. Its concurrency slot is given back at once.
 * `subject`: what the concurrency slot is counted under (a model id, or a name such as `files:upload`).
 */
export async function countRequest(limits: RequestLimits, caller: Caller, subject: string): Promise<RateLimitState | undefined> {
  const lease = await limits.admit({
    accountId: caller.accountId,
    keyId: caller.keyId,
    model: subject,
    estimatedTokens: 0,
    limits: caller.limits,
  });
  await lease.release(0);
  return lease.state;
}
