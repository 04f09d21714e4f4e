import { limitSettings, processEnvironment } from "../config/environment.js";

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
 * The defaults from SWITCHYARD_MAX_CONCURRENT_PER_MODEL (default 200), SWITCHYARD_DEFAULT_RPM and
 * SWITCHYARD_DEFAULT_TPM (default: unlimited), as config/environment.ts reads them: unset or empty
 * means the default; anything but a positive integer is a startup error.
 */
export function limitDefaultsFromEnv(env: Record<string, string | undefined> = processEnvironment()): LimitDefaults {
  const { concurrentPerModel, rpm, tpm } = limitSettings(env);
  return {
    concurrentPerAccountModel: concurrentPerModel ?? DEFAULT_CONCURRENT_PER_ACCOUNT_MODEL,
    requestsPerMinute: rpm,
    tokensPerMinute: tpm,
  };
}
