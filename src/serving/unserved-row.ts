/**
 * The ledger row of a request that ends without its answer (refused, expired, failed or cancelled
 * before any output): chat and embeddings alike release what the request held and write one row at
 * cost 0, which frees its budget reservation in the same statement.
 */
import type { UsageStatus } from "../protocol/usage.js";
import { ServiceError } from "../errors.js";
import type { Holdings } from "./admission.js";
import type { RequestMeter } from "./request-meter.js";

export interface Unserved {
  status: UsageStatus;
  errorCode: string;
  /** Tokens the rate limit keeps counting for it (default 0: a refusal used nothing). */
  tokensUsed?: number;
}

export async function recordUnserved(meter: RequestMeter, held: Holdings, { status, errorCode, tokensUsed = 0 }: Unserved): Promise<void> {
  await Promise.allSettled([held.lease?.release(tokensUsed)]);
  await meter.record({
    status,
    serviceTier: held.tier,
    promptTokens: held.promptTokens,
    cachedTokens: 0,
    completionTokens: 0,
    costUsd: "0",
    finishReason: null,
    errorCode,
  });
}

/** The code a row records for `error`: an API error's code (else its type); anything else is `otherwise`. */
export function errorCodeOf(error: unknown, otherwise = "internal_error"): string {
  return error instanceof ServiceError ? (error.code ?? error.type) : otherwise;
}
