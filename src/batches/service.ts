import { InvalidRequest, NotFound, ServiceError } from "../errors.js";
import type { Database } from "../storage/database.js";
import { FileQuotaExceeded, type FileStore, type FileWriter, type StoredFile } from "../storage/files.js";
import type { Caller } from "../serving/types.js";
import { CONTROL_CHARS } from "../protocol/identifiers.js";
import type { FormPart } from "../protocol/form-parts.js";
import type { BatchLimits } from "./limits.js";
import {
  dropLines,
  enqueuedTokens,
  failBatch,
  getBatch,
  insertBatch,
  insertLines,
  listBatches,
  requestCancel,
  startBatch,
  type BatchRow,
} from "./batch-store.js";
import { checkBatchFile, type BatchEndpoint } from "./validate.js";
import type { LineError } from "../protocol/batches-response.js";
import { jsonl, validationErrorLines } from "./output-files.js";

/** The one completion window OpenAI offers. */
const WINDOWS: Record<string, number> = { "24h": 24 * 3600 };

export interface BatchOwner {
  accountId: string;
  keyId: string;
}

/** One part of an upload's form, in the order sent: a field, or the file's bytes as they arrive. */
export type UploadPart = FormPart;

export interface CreateBatchInput {
  inputFileId: string;
  endpoint: string;
  completionWindow: string;
  metadata: Record<string, string> | null;
}

export interface BatchServiceDeps {
  db: Database;
  /** The endpoints a batch may run, with their body schemas: api/'s batchable declarations (api/registry.ts). */
  endpoints: readonly BatchEndpoint[];
  files: FileStore;
  limits: BatchLimits;
  /** The server process that runs what it creates (server_owners). */
  ownerId: string;
  /** A batch was created or cancelled: the runner looks now rather than at its next poll. */
  wake(): void;
  /** An upload counts as a request against the key's rate limit and needs budget left; throws the 429 or 402. */
  admitUpload(caller: Caller): Promise<void>;
  log?(message: string): void;
  /** How long a completion window lasts, in seconds (tests shorten it); default: as named. */
  windowSeconds?: (window: string) => number;
}

const notFound = (kind: string, id: string) => new NotFound(`No ${kind} with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/**
 * The Files and Batch APIs' operations, scoped to the calling account. A batch is validated when it
 * is created: a bad file fails it at once, with an error file naming each bad line.
 */
export function createBatchService(deps: BatchServiceDeps) {
  const { db, files } = deps;
  return {
    uploadFile: (caller: Caller, parts: AsyncIterable<UploadPart>) => storeUpload(deps, caller, parts),

    async create(owner: BatchOwner, input: CreateBatchInput): Promise<BatchRow> {
      const endpoint = checkBatchOptions(deps.endpoints, input);
      const found = await batchInputFile(files, owner, input.inputFileId);
      await checkActiveBatches(deps, owner.accountId);
      const windowSeconds = deps.windowSeconds?.(input.completionWindow) ?? WINDOWS[input.completionWindow]!;
      const batch = await insertBatch(
        db,
        {
          ...owner,
          endpoint: input.endpoint,
          inputFileId: found.file.id,
          completionWindow: input.completionWindow,
          windowSeconds,
          metadata: input.metadata,
        },
        deps.ownerId,
      );
      await validateAndStart(deps, batch, endpoint, found.chunks);
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
      throw new ServiceError(
        409,
        "invalid_request_error",
        `The batch is ${batch.status}; only a validating or in-progress batch can be cancelled.`,
        "batch_not_cancellable",
      );
    },
  };
}

/** The endpoint and completion window a batch names: each a 400 naming its parameter when unsupported. */
function checkBatchOptions(endpoints: readonly BatchEndpoint[], input: CreateBatchInput): BatchEndpoint {
  const endpoint = endpoints.find((e) => e.url === input.endpoint);
  if (!endpoint) {
    throw new InvalidRequest(
      `Unsupported endpoint '${input.endpoint.slice(0, 60)}'; use one of ${endpoints.map((e) => e.url).join(", ")}.`,
      "endpoint",
      "invalid_value",
    );
  }
  if (!(input.completionWindow in WINDOWS))
    throw new InvalidRequest("Invalid 'completion_window': only '24h' is supported.", "completion_window", "invalid_value");
  return endpoint;
}

/** The account's input file, with purpose `batch`: a 404 for another account's or a missing one. */
async function batchInputFile(files: BatchServiceDeps["files"], owner: BatchOwner, fileId: string) {
  const found = await files.read(owner.accountId, fileId);
  const file = found?.file;
  if (!found || !file)
    throw new ServiceError(404, "invalid_request_error", `No file with id '${fileId.slice(0, 64)}' found.`, "not_found", "input_file_id");
  if (file.purpose !== "batch")
    throw new InvalidRequest(
      `The file '${file.id}' has purpose '${file.purpose}'; a batch's input file must have purpose 'batch'.`,
      "input_file_id",
      "invalid_value",
    );
  return { file, chunks: found.chunks };
}

/** Streams the form's file into storage as it arrives; nothing is listed unless all of it was stored. */
async function storeUpload(deps: BatchServiceDeps, caller: Caller, parts: AsyncIterable<UploadPart>): Promise<StoredFile> {
  await deps.admitUpload(caller);
  const room = await fileRoom(deps, caller.accountId);
  let purpose: string | undefined;
  let writer: FileWriter | undefined;
  try {
    for await (const part of parts) {
      if ("field" in part) {
        if (part.field === "purpose") purpose = checkPurpose(part.value);
        continue;
      }
      if (writer) throw new InvalidRequest("Upload one file per request.", "file", "invalid_value");
      writer = await deps.files.open(caller.accountId, {
        purpose: purpose ?? "batch",
        filename: checkFilename(part.filename),
        room: room.bytes,
      });
      for await (const bytes of part.bytes) await writer.append(bytes);
    }
    if (!writer) throw new InvalidRequest("Missing required parameter: 'file'.", "file", "missing_required_parameter");
    if (purpose === undefined) throw new InvalidRequest("Missing required parameter: 'purpose'.", "purpose", "missing_required_parameter");
    await writer.flush();
    return await writer.commit();
  } catch (error) {
    // What was written goes; if even that fails, the start-up sweep removes it: the caller's error is what is answered.
    await writer?.abort().catch(() => {});
    throw error instanceof FileQuotaExceeded ? room.refusal() : error;
  }
}

const checkPurpose = (purpose: string) => {
  if (purpose !== "batch")
    throw new InvalidRequest(
      `Unsupported purpose '${purpose.slice(0, 40)}'; this server accepts files with purpose 'batch'.`,
      "purpose",
      "invalid_value",
    );
  return purpose;
};

/** A file name as stored: at most 256 characters, and none PostgreSQL's text refuses (NUL) or a terminal would act on. */
function checkFilename(name: string): string {
  if (CONTROL_CHARS.test(name))
    throw new InvalidRequest("The file name contains control characters (NUL, newline, ...); rename the file.", "file", "invalid_value");
  return name.slice(0, 256) || "upload.jsonl";
}

/**
 * How many bytes an upload may bring: the per-file limit, or what is left of the account's quota,
 * whichever is less; and the error for passing it (413 for the file's limit, 429 naming the quota).
 */
async function fileRoom({ files, limits }: BatchServiceDeps, accountId: string): Promise<{ bytes: number; refusal(): ServiceError }> {
  const usage = await files.usage(accountId);
  if (usage.files >= limits.filesPerAccount)
    throw new ServiceError(
      429,
      "rate_limit_error",
      `This account keeps ${usage.files} files, the most it may; delete some first.`,
      "too_many_files",
    );
  const left = Math.max(0, limits.fileBytesPerAccount - usage.bytes);
  if (left === 0) throw quotaExceeded(limits.fileBytesPerAccount, usage.bytes);
  const bytes = Math.min(limits.maxFileBytes, left);
  const refusal = () =>
    bytes === limits.maxFileBytes
      ? new ServiceError(
          413,
          "invalid_request_error",
          `The file is larger than the limit of ${limits.maxFileBytes} bytes (SWITCHYARD_FILE_MAX_BYTES).`,
          "file_too_large",
          "file",
        )
      : quotaExceeded(limits.fileBytesPerAccount, usage.bytes);
  return { bytes, refusal };
}

/** The account's files (inputs, outputs and files being written) would pass its byte quota. */
export const quotaExceeded = (quota: number, used: number) =>
  new ServiceError(
    429,
    "rate_limit_error",
    `This account's files would pass its storage quota of ${quota} bytes (SWITCHYARD_FILE_BYTES_PER_ACCOUNT; ${used} in use, batch outputs included); delete some files first.`,
    "file_storage_limit_exceeded",
    "file",
  );

async function checkActiveBatches({ db, limits }: BatchServiceDeps, accountId: string): Promise<void> {
  const rows = await db.query<{ n: string | number }>(
    "SELECT count(*) AS n FROM batches WHERE account_id = $1 AND status IN ('validating', 'in_progress', 'finalizing', 'cancelling')",
    [accountId],
  );
  const active = Number(rows[0]?.n ?? 0);
  if (active >= limits.activeBatchesPerAccount)
    throw new ServiceError(
      429,
      "rate_limit_error",
      `This account has ${active} batches running, the most it may; wait for one to finish or cancel one.`,
      "too_many_batches",
    );
}

/**
 * Validates the input file as it is read from storage, copying valid lines in as they come, a slice
 * at a time (the event loop is never held for long); a bad file fails the batch with its errors
 * (and an error file), and its lines go. Any other failure fails the batch too: it never stays
 * `validating`. Else the lines are enqueued, under the account's enqueued-token cap.
 */
async function validateAndStart(
  deps: BatchServiceDeps,
  batch: BatchRow,
  endpoint: BatchEndpoint,
  chunks: AsyncIterable<Uint8Array>,
): Promise<void> {
  const { db, limits } = deps;
  let errors: LineError[];
  let total = 0;
  let tokens = 0;
  try {
    // A file that cannot fit the account's enqueued-token cap stops being read once that is plain (checked again at the start, under the lock).
    const room = limits.enqueuedTokensPerAccount - (await enqueuedTokens(db, batch.account_id, batch.id));
    const checking = checkBatchFile(chunks, endpoint, limits.maxRequests);
    for (;;) {
      const next = await checking.next();
      if (next.done) {
        errors = next.value;
        break;
      }
      tokens = next.value.reduce((sum, line) => sum + line.estimatedTokens, tokens);
      if (tokens > room) {
        errors = [tokenLimitExceeded(limits, limits.enqueuedTokensPerAccount - room, tokens, true)];
        break;
      }
      await insertLines(db, batch.id, next.value);
      total += next.value.length;
    }
    if (errors.length === 0) errors = (await enqueue(deps, batch, total, tokens)) ?? [];
  } catch (error) {
    deps.log?.(`batch ${batch.id}: validation failed: ${error instanceof Error ? error.message : String(error)}`);
    errors = [
      {
        code: "validation_failed",
        message: "The input file could not be read and validated; create the batch again.",
        param: null,
        line: null,
      },
    ];
  }
  if (errors.length === 0) return;
  await dropLines(db, batch.id);
  await fail(deps, batch, errors);
}

/** The batch's lines would pass the account's enqueued-token cap (`atLeast`: counted until they did). */
function tokenLimitExceeded(limits: BatchLimits, enqueued: number, tokens: number, atLeast: boolean): LineError {
  const message = `Enqueued token limit reached: this account's batches hold ${enqueued} tokens enqueued and this batch would add ${atLeast ? "at least " : ""}${tokens}; the limit is ${limits.enqueuedTokensPerAccount}. Retry once running batches have finished.`;
  return { code: "token_limit_exceeded", message, param: null, line: null };
}

/** Starts the batch unless its tokens would pass the account's enqueued-token cap (then: why not). */
async function enqueue({ db, limits }: BatchServiceDeps, batch: BatchRow, total: number, tokens: number): Promise<LineError[] | null> {
  return db.transaction(async (tx) => {
    // The account's row lock: two batches created at once cannot both slip under the cap.
    await tx.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [batch.account_id]);
    const enqueued = await enqueuedTokens(tx, batch.account_id, batch.id);
    if (enqueued + tokens > limits.enqueuedTokensPerAccount) return [tokenLimitExceeded(limits, enqueued, tokens, false)];
    // Cancelled while it validated: the runner closes its lines.
    await startBatch(tx, batch.id, total, tokens);
    return null;
  });
}

async function fail({ db, files, limits }: BatchServiceDeps, batch: BatchRow, errors: LineError[]): Promise<void> {
  const usage = await files.usage(batch.account_id);
  // The error file counts against the account's caps too; without room the errors are still on the batch.
  const room = usage.files < limits.filesPerAccount;
  const errorFile = room
    ? await files.create(batch.account_id, {
        purpose: "batch_output",
        filename: `${batch.id}_errors.jsonl`,
        content: jsonl(validationErrorLines(batch.id, errors)),
      })
    : null;
  await failBatch(db, batch.id, errors, errorFile?.id ?? null);
}

export type BatchService = ReturnType<typeof createBatchService>;
