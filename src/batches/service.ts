import { InvalidRequest, NotFound, ServiceError } from "../errors.js";
import type { Database } from "../storage/database.js";
import type { FileStore, StoredFile } from "../storage/files.js";
import type { BatchLimits } from "./limits.js";
import { enqueuedTokens, failBatch, getBatch, insertBatch, listBatches, requestCancel, startBatch, type BatchRow } from "./store.js";
import { BATCH_ENDPOINTS, validateBatchFile, type BatchEndpoint, type LineError } from "./validate.js";
import { jsonl, validationErrorLines } from "./output.js";

/** The one completion window OpenAI offers. */
const WINDOWS: Record<string, number> = { "24h": 24 * 3600 };

export interface BatchOwner {
  accountId: string;
  keyId: string;
}

export interface CreateBatchInput {
  inputFileId: string;
  endpoint: string;
  completionWindow: string;
  metadata: Record<string, string> | null;
}

export interface BatchServiceDeps {
  db: Database;
  files: FileStore;
  limits: BatchLimits;
  /** The server process that runs what it creates (server_owners). */
  ownerId: string;
  /** A batch was created or cancelled: the runner looks now rather than at its next poll. */
  wake(): void;
  /** How long a completion window lasts, in seconds (tests shorten it); default: as named. */
  windowSeconds?: (window: string) => number;
}

const notFound = (kind: string, id: string) => new NotFound(`No ${kind} with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/**
 * The Files and Batch APIs' operations, scoped to the calling account. A batch is validated when it
 * is created: a bad file fails it at once, with an error file naming each bad line.
 */
export function createBatchService(deps: BatchServiceDeps) {
  const { db, files, limits } = deps;
  return {
    async uploadFile(owner: BatchOwner, file: { purpose: string; filename: string; content: Buffer }): Promise<StoredFile> {
      if (file.purpose !== "batch") throw new InvalidRequest(`Unsupported purpose '${file.purpose.slice(0, 40)}'; this server accepts files with purpose 'batch'.`, "purpose", "invalid_value");
      await checkFileCaps(deps, owner.accountId, file.content.byteLength);
      return files.create(owner.accountId, file);
    },

    async create(owner: BatchOwner, input: CreateBatchInput): Promise<BatchRow> {
      if (!(BATCH_ENDPOINTS as readonly string[]).includes(input.endpoint)) {
        throw new InvalidRequest(`Unsupported endpoint '${input.endpoint.slice(0, 60)}'; use one of ${BATCH_ENDPOINTS.join(", ")}.`, "endpoint", "invalid_value");
      }
      if (!(input.completionWindow in WINDOWS)) throw new InvalidRequest("Invalid 'completion_window': only '24h' is supported.", "completion_window", "invalid_value");
      const file = await files.get(owner.accountId, input.inputFileId);
      if (!file) throw new ServiceError(404, "invalid_request_error", `No file with id '${input.inputFileId.slice(0, 64)}' found.`, "not_found", "input_file_id");
      if (file.purpose !== "batch") throw new InvalidRequest(`The file '${file.id}' has purpose '${file.purpose}'; a batch's input file must have purpose 'batch'.`, "input_file_id", "invalid_value");
      await checkActiveBatches(deps, owner.accountId);
      const windowSeconds = deps.windowSeconds?.(input.completionWindow) ?? WINDOWS[input.completionWindow]!;
      const batch = await insertBatch(db, { ...owner, endpoint: input.endpoint, inputFileId: file.id, completionWindow: input.completionWindow, windowSeconds, metadata: input.metadata }, deps.ownerId);
      await validateAndStart(deps, batch, (await files.content(owner.accountId, file.id)) ?? Buffer.alloc(0));
      deps.wake();
      return (await getBatch(db, owner.accountId, batch.id))!;
    },

    async get(owner: BatchOwner, id: string): Promise<BatchRow> {
      const batch = await getBatch(db, owner.accountId, id);
      if (!batch) throw notFound("batch", id);
      return batch;
    },

    list: (owner: BatchOwner, limit: number, after?: string) => listBatches(db, owner.accountId, limit, after),

    async cancel(owner: BatchOwner, id: string): Promise<BatchRow> {
      const cancelling = await requestCancel(db, owner.accountId, id);
      if (cancelling) {
        deps.wake();
        return cancelling;
      }
      const batch = await getBatch(db, owner.accountId, id);
      if (!batch) throw notFound("batch", id);
      if (batch.status === "cancelling" || batch.status === "cancelled") return batch;
      throw new ServiceError(409, "invalid_request_error", `The batch is ${batch.status}; only a validating or in-progress batch can be cancelled.`, "batch_not_cancellable");
    },
  };
}

async function checkFileCaps({ files, limits }: BatchServiceDeps, accountId: string, bytes: number): Promise<void> {
  const usage = await files.usage(accountId);
  if (usage.files >= limits.filesPerAccount) throw new ServiceError(429, "rate_limit_error", `This account keeps ${usage.files} files, the most it may; delete some first.`, "too_many_files");
  if (usage.bytes + bytes > limits.fileBytesPerAccount) {
    throw new ServiceError(429, "rate_limit_error", `This account's files would hold ${usage.bytes + bytes} bytes, over its limit of ${limits.fileBytesPerAccount}; delete some first.`, "file_storage_limit_exceeded");
  }
}

async function checkActiveBatches({ db, limits }: BatchServiceDeps, accountId: string): Promise<void> {
  const rows = await db.query<{ n: string | number }>("SELECT count(*) AS n FROM batches WHERE account_id = $1 AND status IN ('validating', 'in_progress', 'finalizing', 'cancelling')", [accountId]);
  const active = Number(rows[0]?.n ?? 0);
  if (active >= limits.activeBatchesPerAccount) throw new ServiceError(429, "rate_limit_error", `This account has ${active} batches running, the most it may; wait for one to finish or cancel one.`, "too_many_batches");
}

/** Validates the input file; a bad one fails the batch with its errors (and an error file). Else the lines are enqueued. */
async function validateAndStart(deps: BatchServiceDeps, batch: BatchRow, content: Buffer): Promise<void> {
  const { db, limits } = deps;
  const validation = validateBatchFile(content, batch.endpoint as BatchEndpoint, limits.maxRequests);
  if (!validation.ok) return fail(deps, batch, validation.errors);
  const tokens = validation.lines.reduce((sum, line) => sum + line.estimatedTokens, 0);
  const refused = await db.transaction(async (tx) => {
    // The account's row lock: two batches created at once cannot both slip under the cap.
    await tx.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [batch.account_id]);
    const enqueued = await enqueuedTokens(tx, batch.account_id);
    if (enqueued + tokens > limits.enqueuedTokensPerAccount) {
      const message = `Enqueued token limit reached: this account's batches hold ${enqueued} tokens enqueued and this batch would add ${tokens}; the limit is ${limits.enqueuedTokensPerAccount}. Retry once running batches have finished.`;
      return [{ code: "token_limit_exceeded", message, param: null, line: null }];
    }
    await startBatch(tx, batch.id, validation.lines);
    return null;
  });
  if (refused) await fail(deps, batch, refused);
}

async function fail({ db, files, limits }: BatchServiceDeps, batch: BatchRow, errors: LineError[]): Promise<void> {
  const usage = await files.usage(batch.account_id);
  // The error file counts against the account's caps too; without room the errors are still on the batch.
  const room = usage.files < limits.filesPerAccount;
  const errorFile = room ? await files.create(batch.account_id, { purpose: "batch_output", filename: `${batch.id}_errors.jsonl`, content: jsonl(validationErrorLines(batch.id, errors)) }) : null;
  await failBatch(db, batch.id, errors, errorFile?.id ?? null);
}

export type BatchService = ReturnType<typeof createBatchService>;
