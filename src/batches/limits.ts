/** The Files and Batch APIs' limits (documented in the README); config/settings.ts reads and clamps them. */
export interface BatchLimits {
  /** Largest file one upload may carry (SWITCHYARD_FILE_MAX_BYTES; OpenAI: 200 MB). */
  maxFileBytes: number;
  /** Requests one batch may hold (SWITCHYARD_BATCH_MAX_REQUESTS; OpenAI: 50,000). */
  maxRequests: number;
  /** Files one account may keep, generated output files included (SWITCHYARD_FILES_PER_ACCOUNT). */
  filesPerAccount: number;
  /** Bytes one account may keep in files, its running batches' answers included (SWITCHYARD_FILE_BYTES_PER_ACCOUNT). */
  fileBytesPerAccount: number;
  /** Tokens an account's unfinished batches may hold enqueued (SWITCHYARD_BATCH_ENQUEUED_TOKENS; OpenAI's enqueued token limit). */
  enqueuedTokensPerAccount: number;
  /** Batches one account may have running at once (SWITCHYARD_BATCHES_PER_ACCOUNT). */
  activeBatchesPerAccount: number;
  /** Uploads one account may send at once (SWITCHYARD_UPLOADS_PER_ACCOUNT). */
  uploadsPerAccount: number;
  /** Uploads the whole process reads at once, all accounts together (SWITCHYARD_UPLOADS_IN_FLIGHT). */
  uploadsInFlight: number;
}
