/** The Files and Batch APIs' limits (documented in the README); each can be set in the environment. */
export interface BatchLimits {
  /** Largest file one upload may carry (SWITCHYARD_FILE_MAX_BYTES; OpenAI: 200 MB). */
  maxFileBytes: number;
  /** Requests one batch may hold (SWITCHYARD_BATCH_MAX_REQUESTS; OpenAI: 50,000). */
  maxRequests: number;
  /** Files one account may keep, generated output files included (SWITCHYARD_FILES_PER_ACCOUNT). */
  filesPerAccount: number;
  /** Bytes one account may keep in files (SWITCHYARD_FILE_BYTES_PER_ACCOUNT). */
  fileBytesPerAccount: number;
  /** Tokens an account's unfinished batches may hold enqueued (SWITCHYARD_BATCH_ENQUEUED_TOKENS; OpenAI's enqueued token limit). */
  enqueuedTokensPerAccount: number;
  /** Batches one account may have running at once (SWITCHYARD_BATCHES_PER_ACCOUNT). */
  activeBatchesPerAccount: number;
}

export const DEFAULT_BATCH_LIMITS: BatchLimits = {
  maxFileBytes: 200 * 1024 * 1024,
  maxRequests: 50_000,
  filesPerAccount: 1000,
  fileBytesPerAccount: 2 * 1024 * 1024 * 1024,
  enqueuedTokensPerAccount: 20_000_000,
  activeBatchesPerAccount: 100,
};

const ENV: Record<keyof BatchLimits, string> = {
  maxFileBytes: "SWITCHYARD_FILE_MAX_BYTES",
  maxRequests: "SWITCHYARD_BATCH_MAX_REQUESTS",
  filesPerAccount: "SWITCHYARD_FILES_PER_ACCOUNT",
  fileBytesPerAccount: "SWITCHYARD_FILE_BYTES_PER_ACCOUNT",
  enqueuedTokensPerAccount: "SWITCHYARD_BATCH_ENQUEUED_TOKENS",
  activeBatchesPerAccount: "SWITCHYARD_BATCHES_PER_ACCOUNT",
};

export function batchLimitsFromEnv(env: NodeJS.ProcessEnv): BatchLimits {
  const limits = { ...DEFAULT_BATCH_LIMITS };
  for (const key of Object.keys(ENV) as (keyof BatchLimits)[]) {
    const raw = env[ENV[key]];
    if (raw === undefined || raw === "") continue;
    const value = Number(raw);
    if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${ENV[key]} must be a positive integer, got '${raw}'.`);
    limits[key] = value;
  }
  return limits;
}
