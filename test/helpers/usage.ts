import { randomUUID } from "node:crypto";
import type { UsageRecord } from "../../src/billing/ports.js";

/** A completed usage row with plausible values; override what a test is about. */
export function usage(accountId: string, keyId: string, overrides: Partial<UsageRecord> = {}): UsageRecord {
  return {
    requestId: `chatcmpl-${randomUUID()}`,
    accountId,
    keyId,
    model: "qwen/qwen3-0.6b",
    serviceTier: "default",
    promptTokens: 10,
    cachedTokens: 0,
    completionTokens: 5,
    costUsd: "0.000001",
    status: "completed",
    finishReason: "stop",
    errorCode: null,
    queueMs: 1,
    ttftMs: 20,
    durationMs: 100,
    ...overrides,
  };
}

/**
 * A SmolLM2 response's cost at the standard tier, in units of 1e-8 USD: 2 per uncached prompt
 * token, 1 per cached one (the prefix cache), 6 per completion token.
 */
export function smolStandardUnits(usage: {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number };
}): number {
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
  return (usage.prompt_tokens - cached) * 2 + cached + usage.completion_tokens * 6;
}
