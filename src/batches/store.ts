import { randomBytes } from "node:crypto";
import type { Database } from "../storage/database.js";
import type { BatchLine, LineError } from "./validate.js";

export type BatchStatus = "validating" | "failed" | "in_progress" | "finalizing" | "completed" | "expired" | "cancelling" | "cancelled";

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
  answer: string | null;
  error: string | null;
}

export const newBatchId = () => `batch_${randomBytes(18).toString("base64url")}`;

/** Rows per INSERT when a batch's lines are copied in: well under PostgreSQL's 65,535 parameters. */
const INSERT_CHUNK = 1000;

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
    [newBatchId(), batch.accountId, batch.keyId, batch.endpoint, batch.inputFileId, batch.completionWindow, batch.metadata && JSON.stringify(batch.metadata), ownerId, batch.windowSeconds],
  );
  return rows[0]!;
}

/** Copies the validated lines in and starts the batch, in one transaction. */
export async function startBatch(tx: Database, id: string, lines: readonly BatchLine[]): Promise<void> {
  for (let start = 0; start < lines.length; start += INSERT_CHUNK) {
    const chunk = lines.slice(start, start + INSERT_CHUNK);
    const values = chunk.map((_, i) => `($1, $${i * 4 + 2}, $${i * 4 + 3}, $${i * 4 + 4}, $${i * 4 + 5})`).join(", ");
    await tx.query(`INSERT INTO batch_lines (batch_id, line, custom_id, body, estimated_tokens) VALUES ${values}`, [id, ...chunk.flatMap((l) => [l.line, l.customId, l.body, l.estimatedTokens])]);
  }
  const tokens = lines.reduce((sum, l) => sum + l.estimatedTokens, 0);
  await tx.query("UPDATE batches SET status = 'in_progress', in_progress_at = now(), total = $2, enqueued_tokens = $3 WHERE id = $1", [id, lines.length, tokens]);
}

export async function failBatch(db: Database, id: string, errors: readonly LineError[], errorFileId: string | null): Promise<void> {
  await db.query("UPDATE batches SET status = 'failed', failed_at = now(), errors = $2, error_file_id = $3 WHERE id = $1", [id, JSON.stringify(errors), errorFileId]);
}

/** Tokens the account's batches still have enqueued: lines not yet answered, in batches still running. */
export async function enqueuedTokens(db: Database, accountId: string): Promise<number> {
  const rows = await db.query<{ total: string | number }>(
    `SELECT COALESCE(sum(l.estimated_tokens), 0) AS total FROM batch_lines l JOIN batches b ON b.id = l.batch_id
      WHERE b.account_id = $1 AND b.status IN ('validating', 'in_progress') AND NOT l.done`,
    [accountId],
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
  const cursor = after === undefined ? "" : `AND (created_at, id) < (SELECT created_at, id FROM batches WHERE id = $${params.push(after)} AND account_id = $1)`;
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
  return db.query<PendingLine>("SELECT line, custom_id, body FROM batch_lines WHERE batch_id = $1 AND NOT done AND line > $2 ORDER BY line LIMIT $3", [batchId, afterLine, limit]);
}

export async function doneLines(db: Database, batchId: string): Promise<DoneLine[]> {
  return db.query<DoneLine>("SELECT line, custom_id, request_id, status_code, answer, error FROM batch_lines WHERE batch_id = $1 ORDER BY line", [batchId]);
}

/**
 * Records a line's answer once: the line, its ledger row's link and the batch's counts change in
 * one transaction. False when the line was already answered (its answer stands).
 */
export async function answerLine(db: Database, batchId: string, line: number, answer: { requestId: string | null; statusCode: number | null; body: string | null; error: string | null }): Promise<boolean> {
  return db.transaction(async (tx) => {
    const rows = await tx.query(
      "UPDATE batch_lines SET done = true, request_id = $3, status_code = $4, answer = $5, error = $6 WHERE batch_id = $1 AND line = $2 AND NOT done RETURNING line",
      [batchId, line, answer.requestId, answer.statusCode, answer.body, answer.error],
    );
    if (rows.length === 0) return false;
    const column = answer.statusCode === 200 ? "completed" : "failed";
    await tx.query(`UPDATE batches SET ${column} = ${column} + 1 WHERE id = $1`, [batchId]);
    return true;
  });
}

/** Every line not answered yet gets this error (expiry, cancellation); none of them is billed. */
export async function closeOpenLines(db: Database, batchId: string, error: { code: string; message: string }): Promise<void> {
  await db.transaction(async (tx) => {
    const rows = await tx.query("UPDATE batch_lines SET done = true, error = $2 WHERE batch_id = $1 AND NOT done RETURNING line", [batchId, JSON.stringify(error)]);
    await tx.query("UPDATE batches SET failed = failed + $2 WHERE id = $1", [batchId, rows.length]);
  });
}

export async function setStatus(db: Database, id: string, from: readonly BatchStatus[], to: BatchStatus, extra: Record<string, unknown> = {}): Promise<boolean> {
  const stamp = { finalizing: "finalizing_at", completed: "completed_at", expired: "expired_at", cancelled: "cancelled_at", failed: "failed_at" }[to as string];
  const sets = [`status = '${to}'`, ...(stamp ? [`${stamp} = now()`] : [])];
  const params: unknown[] = [id, [...from]];
  for (const [column, value] of Object.entries(extra)) sets.push(`${column} = $${params.push(value)}`);
  const rows = await db.query(`UPDATE batches SET ${sets.join(", ")} WHERE id = $1 AND status = ANY($2::text[]) RETURNING id`, params);
  return rows.length > 0;
}
