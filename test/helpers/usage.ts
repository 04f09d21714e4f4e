import { randomUUID } from "node:crypto";
import type { UsageRecord } from "../../src/serving/ports.js";

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
