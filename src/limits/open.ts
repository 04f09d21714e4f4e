import type { RequestLimits } from "./ports.js";
import { limitDefaultsFromEnv } from "./defaults.js";
import { createMemoryLimits } from "./in-memory-limits.js";
import { createRedisLimits } from "./redis.js";
import { processEnvironment, redisUrl as redisUrlOf } from "../config/environment.js";

export interface OpenedRequestLimits extends RequestLimits {
  /** "redis" when several processes share the limits, "memory" when they are this process's own. */
  readonly kind: "memory" | "redis";
  close(): Promise<void>;
}

/**
 * The server's request limits, with defaults from the environment (see limitDefaultsFromEnv): in
 * Redis when SWITCHYARD_REDIS_URL is set (so several server processes share them), else in memory.
 * With Redis, fails here, at startup, when it cannot be reached.
 */
export async function openRequestLimits(env: Record<string, string | undefined> = processEnvironment()): Promise<OpenedRequestLimits> {
  const defaults = limitDefaultsFromEnv(env);
  const redisUrl = redisUrlOf(env);
  if (!redisUrl) {
    const memory = createMemoryLimits(defaults);
    return { kind: "memory", admit: (request) => memory.admit(request), peek: (request) => memory.peek!(request), close: async () => {} };
  }
  const redis = createRedisLimits(redisUrl, defaults);
  try {
    await redis.ping();
  } catch (error) {
    await redis.close();
    throw new Error(`SWITCHYARD_REDIS_URL is set but Redis at ${redact(redisUrl)} is unreachable (${(error as Error).message}).`);
  }
  return { kind: "redis", admit: (request) => redis.admit(request), peek: (request) => redis.peek!(request), close: () => redis.close() };
}

function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparseable URL)";
  }
}
