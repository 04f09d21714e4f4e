import { processEnvironment } from "../config/environment.js";

/** Server-wide request limits; a key's own RPM/TPM (when set) replaces the default for that key. */
export interface LimitDefaults {
  /** Requests in flight at once per (account, model). */
  concurrentPerAccountModel: number;
  /** Requests per minute per key when the key has no limit of its own; null: unlimited. */
  requestsPerMinute: number | null;
  /** Tokens (prompt + max_tokens at admission, actual usage after) per minute per key; null: unlimited. */
  tokensPerMinute: number | null;
}

export const DEFAULT_CONCURRENT_PER_ACCOUNT_MODEL = 200;

/**
 * Reads SWITCHYARD_MAX_CONCURRENT_PER_MODEL (default 200), SWITCHYARD_DEFAULT_RPM and
 * SWITCHYARD_DEFAULT_TPM (default: unlimited). Unset or empty means the default; anything but a
 * positive integer is a startup error rather than a silently ignored setting.
 */
export function limitDefaultsFromEnv(env: Record<string, string | undefined> = processEnvironment()): LimitDefaults {
  return {
    concurrentPerAccountModel: positiveInteger(env, "SWITCHYARD_MAX_CONCURRENT_PER_MODEL") ?? DEFAULT_CONCURRENT_PER_ACCOUNT_MODEL,
    requestsPerMinute: positiveInteger(env, "SWITCHYARD_DEFAULT_RPM"),
    tokensPerMinute: positiveInteger(env, "SWITCHYARD_DEFAULT_TPM"),
  };
}

function positiveInteger(env: Record<string, string | undefined>, name: string): number | null {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === "") return null;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < 1) {
    throw new Error(`${name} must be a positive integer, got '${raw}'.`);
  }
  return value;
}
