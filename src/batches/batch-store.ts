import { randomBytes } from "node:crypto";
import type { BatchStatus, LineError } from "../protocol/batches-response.js";
import { bulkPace } from "../storage/bulk-pace.js";
import type { Database } from "../storage/database.js";
import type { BatchLine } from "./validate.js";

/** The states a batch still has work in: the runner owns batches in these. */
export const ACTIVE_STATUSES: readonly BatchStatus[] = ["validating", "in_progress", "finalizing", "cancelling"];

/** A batch row as stored; times are Dates (or null), counts from the lines. */
export interface BatchRow {
  id: string;
  account_id: string;
  key_id: string;
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  status: BatchStatus;
  metadata: string | null;
  errors: string | null;
  output_file_id: string | null;
  error_file_id: string | null;
  total: number;
  completed: number;
  failed: number;
  enqueued_tokens: string | number;
  owner_id: string | null;
  created_at: Date;
  expires_at: Date;
  in_progress_at: Date | null;
  finalizing_at: Date | null;
  completed_at: Date | null;
  failed_at: Date | null;
  expired_at: Date | null;
  cancelling_at: Date | null;
  cancelled_at: Date | null;
}

export interface PendingLine {
  line: number;
  custom_id: string;
  body: string;
}

export interface DoneLine {
  line: number;
  custom_id: string;
  request_id: string | null;
  status_code: number | null;
  /** The answer's JSON text; null when there is none, or when it is kept in chunks under `answer_attempt`. */
  answer: string | null;
  error: string | null;
  answer_attempt?: string | null;
}

export const newBatchId = () => `batch_${randomBytes(18).toString("base64url")}`;

/** Rows per INSERT when a batch's lines are copied in: well under PostgreSQL's 65,535 parameters. */
const INSERT_ROWS = 1000;
/** Body bytes per INSERT: one statement holds the (embedded, single-threaded) database for a few ms at most. */
const INSERT_BYTES = 256 * 1024;

export interface NewBatch {
  accountId: string;
  keyId: string;
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  windowSeconds: number;
  metadata: Record<string, string> | null;
}

export async function insertBatch(db: Database, batch: NewBatch, ownerId: string): Promise<BatchRow> {
  const rows = await db.query<BatchRow>(
    `INSERT INTO batches (id, account_id, key_id, endpoint, input_file_id, completion_window, status, metadata, owner_id, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'validating', $7, $8, now() + make_interval(secs => $9)) RETURNING *`,
    [
      newBatchId(),
      batch.accountId,
      batch.keyId,
      batch.endpoint,
      batch.inputFileId,
      batch.completionWindow,
      batch.metadata && JSON.stringify(batch.metadata),
      ownerId,
      batch.windowSeconds,
    ],
  );
  return rows[0]!;
}

/** Copies validated lines in, while the batch is `validating` (no runner reads them yet), a short statement at a time. */
export async function insertLines(db: Database, id: string, lines: readonly BatchLine[]): Promise<void> {
  for (let start = 0; start < lines.length;) {
    let end = start;
    for (
      let bytes = 0;
      end < lines.length && end - start < INSERT_ROWS && (end === start || bytes + lines[end]!.body.length <= INSERT_BYTES);
      end++
    )
      bytes += lines[end]!.body.length;
    const chunk = lines.slice(start, end);
    await bulkPace();
    const values = chunk.map((_, i) => `($1, $${i * 4 + 2}, $${i * 4 + 3}, $${i * 4 + 4}, $${i * 4 + 5})`).join(", ");
    await db.query(`INSERT INTO batch_lines (batch_id, line, custom_id, body, estimated_tokens) VALUES ${values}`, [
      id,
      ...chunk.flatMap((l) => [l.line, l.customId, l.body, l.estimatedTokens]),
    ]);
    start = end;
  }
}

/** Starts a batch whose lines are all in: `validating` becomes `in_progress`. False when it is no longer validating (cancelled meanwhile). */
export async function startBatch(tx: Database, id: string, total: number, tokens: number): Promise<boolean> {
  const rows = await tx.query(
    "UPDATE batches SET status = 'in_progress', in_progress_at = now(), total = $2, enqueued_tokens = $3 WHERE id = $1 AND status = 'validating' RETURNING id",
    [id, total, tokens],
  );
  return rows.length > 0;
}

/** Drops the lines copied in for a batch that failed validation. */
export async function dropLines(db: Database, id: string): Promise<void> {
  await db.query("DELETE FROM batch_lines WHERE batch_id = $1", [id]);
}

export async function failBatch(db: Database, id: string, errors: readonly LineError[], errorFileId: string | null): Promise<void> {
  await db.query("UPDATE batches SET status = 'failed', failed_at = now(), errors = $2, error_file_id = $3 WHERE id = $1", [
    id,
    JSON.stringify(errors),
    errorFileId,
  ]);
}

/** Tokens the account's batches still have enqueued: lines not yet answered, in batches still running (but `except`, the one being started). */
export async function enqueuedTokens(db: Database, accountId: string, except: string): Promise<number> {
  const rows = await db.query<{ total: string | number }>(
    `SELECT COALESCE(sum(l.estimated_tokens), 0) AS total FROM batch_lines l JOIN batches b ON b.id = l.batch_id
      WHERE b.account_id = $1 AND b.id <> $2 AND b.status IN ('validating', 'in_progress') AND NOT l.done`,
    [accountId, except],
  );
  return Number(rows[0]?.total ?? 0);
}

export async function getBatch(db: Database, accountId: string, id: string): Promise<BatchRow | null> {
  const rows = await db.query<BatchRow>("SELECT * FROM batches WHERE id = $1 AND account_id = $2", [id, accountId]);
  return rows[0] ?? null;
}

/** Newest first, OpenAI's cursor pagination: `after` is the last id of the previous page. */
export async function listBatches(db: Database, accountId: string, limit: number, after?: string): Promise<BatchRow[]> {
  const params: unknown[] = [accountId, limit];
  const cursor =
    after === undefined
      ? ""
      : `AND (created_at, id) < (SELECT created_at, id FROM batches WHERE id = $${params.push(after)} AND account_id = $1)`;
  return db.query<BatchRow>(`SELECT * FROM batches WHERE account_id = $1 ${cursor} ORDER BY created_at DESC, id DESC LIMIT $2`, params);
}

/** Marks an in-progress (or validating) batch cancelling; false when it is not running. */
export async function requestCancel(db: Database, accountId: string, id: string): Promise<BatchRow | null> {
  const rows = await db.query<BatchRow>(
    "UPDATE batches SET status = 'cancelling', cancelling_at = now() WHERE id = $1 AND account_id = $2 AND status IN ('validating', 'in_progress') RETURNING *",
    [id, accountId],
  );
  return rows[0] ?? null;
}

export async function pendingLines(db: Database, batchId: string, afterLine: number, limit: number): Promise<PendingLine[]> {
  return db.query<PendingLine>(
    "SELECT line, custom_id, body FROM batch_lines WHERE batch_id = $1 AND NOT done AND line > $2 ORDER BY line LIMIT $3",
    [batchId, afterLine, limit],
  );
}

/** A page of a batch's lines in order, after line `afterLine` (finalizing reads them page by page). */
export async function doneLines(db: Database, batchId: string, afterLine = 0, limit = 1_000_000): Promise<DoneLine[]> {
  return db.query<DoneLine>(
    "SELECT line, custom_id, request_id, status_code, answer, error, answer_attempt FROM batch_lines WHERE batch_id = $1 AND line > $2 ORDER BY line LIMIT $3",
    [batchId, afterLine, limit],
  );
}

/** Answers longer than this are kept in chunks of this size beside their line, each written in its own short statement. */
export const ANSWER_CHUNK_CHARS = 256 * 1024;

/** A chunked answer's text, a chunk at a time. */
export async function* answerChunks(db: Database, batchId: string, line: number, attempt: string): AsyncGenerator<string> {
  for (let seq = 0; ; seq++) {
    const rows = await db.query<{ content: string }>(
      "SELECT content FROM batch_answer_chunks WHERE batch_id = $1 AND line = $2 AND attempt = $3 AND seq = $4",
      [batchId, line, attempt, seq],
    );
    if (rows.length === 0) return;
    yield rows[0]!.content;
  }
}

/** The bytes an answer adds to the batch's result files: its body and the result line around it. */
export const resultBytes = (customId: string, body: string | null) => Buffer.byteLength(body ?? "") + Buffer.byteLength(customId) + 200;

/** What an account keeps against its storage quota: its files, and what its running batches' answers will write. */
export async function storedBytes(db: Database, accountId: string): Promise<number> {
  const rows = await db.query<{ used: string | number }>(
    `SELECT (SELECT COALESCE(sum(bytes), 0) FROM files WHERE account_id = $1)
          + (SELECT COALESCE(sum(output_bytes), 0) FROM batches WHERE account_id = $1 AND status IN ('in_progress', 'finalizing', 'cancelling')) AS used`,
    [accountId],
  );
  return Number(rows[0]?.used ?? 0);
}

export interface LineAnswer {
  requestId: string | null;
  statusCode: number | null;
  body: string | null;
  error: string | null;
}

/** Why an answer was not kept: the line had one already, or it would pass the account's storage quota. */
export type AnswerRefusal = "answered" | { quota: number; used: number };

/**
 * Records a line's answer once: the line, its ledger row's link and the batch's counts change in
 * one transaction, under the account's row lock, where the answer's bytes are checked against the
 * account's storage quota (`quota`). A large answer is written in chunks first, under an attempt id
 * of its own (an attempt not kept leaves chunks no line names: they go). Null when kept.
 */
export async function answerLine(
  db: Database,
  batch: { id: string; accountId: string },
  line: { line: number; customId: string },
  answer: LineAnswer,
  quota = Infinity,
): Promise<AnswerRefusal | null> {
  const body = answer.body;
  const attempt = body !== null && body.length > ANSWER_CHUNK_CHARS ? randomBytes(12).toString("base64url") : null;
  for (let seq = 0; attempt && body && seq * ANSWER_CHUNK_CHARS < body.length; seq++) {
    const content = body.slice(seq * ANSWER_CHUNK_CHARS, (seq + 1) * ANSWER_CHUNK_CHARS);
    await db.query("INSERT INTO batch_answer_chunks (batch_id, line, attempt, seq, content) VALUES ($1, $2, $3, $4, $5)", [
      batch.id,
      line.line,
      attempt,
      seq,
      content,
    ]);
  }
  const bytes = resultBytes(line.customId, body);
  const refusal = await db.transaction(async (tx): Promise<AnswerRefusal | null> => {
    await tx.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [batch.accountId]);
    const used = quota === Infinity ? 0 : await storedBytes(tx, batch.accountId);
    if (used + bytes > quota) return { quota, used };
    const rows = await tx.query(
      "UPDATE batch_lines SET done = true, request_id = $3, status_code = $4, answer = $5, error = $6, answer_attempt = $7 WHERE batch_id = $1 AND line = $2 AND NOT done RETURNING line",
      [batch.id, line.line, answer.requestId, answer.statusCode, attempt ? null : body, answer.error, attempt],
    );
    if (rows.length === 0) return "answered";
    const column = answer.statusCode === 200 ? "completed" : "failed";
    await tx.query(`UPDATE batches SET ${column} = ${column} + 1, output_bytes = output_bytes + $2 WHERE id = $1`, [batch.id, bytes]);
    return null;
  });
  if (refusal && attempt)
    await db.query("DELETE FROM batch_answer_chunks WHERE batch_id = $1 AND line = $2 AND attempt = $3", [batch.id, line.line, attempt]);
  return refusal;
}

/** Every line not answered yet gets this error (expiry, cancellation, the storage quota); none of them is billed. */
export async function closeOpenLines(db: Database, batchId: string, error: { code: string; message: string }): Promise<void> {
  // A page of lines per transaction: a batch of 50,000 lines is closed in short statements, not one long one.
  for (let closed = CLOSE_PAGE; closed === CLOSE_PAGE;) {
    await bulkPace();
    closed = await db.transaction(async (tx) => {
      const rows = await tx.query(
        "UPDATE batch_lines SET done = true, error = $2 WHERE batch_id = $1 AND line IN (SELECT line FROM batch_lines WHERE batch_id = $1 AND NOT done ORDER BY line LIMIT $3) RETURNING line",
        [batchId, JSON.stringify(error), CLOSE_PAGE],
      );
      await tx.query("UPDATE batches SET failed = failed + $2 WHERE id = $1", [batchId, rows.length]);
      return rows.length;
    });
  }
}

/** Lines closed per statement. */
const CLOSE_PAGE = 250;

export async function setStatus(
  db: Database,
  id: string,
  from: readonly BatchStatus[],
  to: BatchStatus,
  extra: Record<string, unknown> = {},
): Promise<boolean> {
  const stamp = {
    finalizing: "finalizing_at",
    completed: "completed_at",
    expired: "expired_at",
    cancelled: "cancelled_at",
    failed: "failed_at",
  }[to as string];
  const sets = [`status = '${to}'`, ...(stamp ? [`${stamp} = now()`] : [])];
  const params: unknown[] = [id, [...from]];
  for (const [column, value] of Object.entries(extra)) sets.push(`${column} = $${params.push(value)}`);
  const rows = await db.query(`UPDATE batches SET ${sets.join(", ")} WHERE id = $1 AND status = ANY($2::text[]) RETURNING id`, params);
  return rows.length > 0;
}

/** Once a batch's result files are written, its chunked answers are no longer read. */
export async function dropAnswerChunks(db: Database, batchId: string): Promise<void> {
  await db.query("DELETE FROM batch_answer_chunks WHERE batch_id = $1", [batchId]);
}
