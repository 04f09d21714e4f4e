/**
 * The Files and Batch APIs' objects built from their rows; their shapes are declared in
 * protocol/batches-response.ts, where the console reads them too.
 */
import type { BatchRow } from "./batch-store.js";
import type { LineError, WireBatch, WireFile } from "../protocol/batches-response.js";
import { listOf } from "../protocol/list-page.js";
import type { StoredFile } from "../storage/files.js";

/** Unix seconds, null for a time not reached. */
function seconds(date: Date): number;
function seconds(date: Date | null): number | null;
function seconds(date: Date | null): number | null {
  return date === null ? null : Math.floor(new Date(date).getTime() / 1000);
}

/** OpenAI's file object. Files here are processed when they are stored and kept until deleted. */
export function toWireFile(file: StoredFile): WireFile {
  return {
    id: file.id,
    object: "file",
    bytes: file.bytes,
    created_at: seconds(file.createdAt),
    expires_at: null,
    filename: file.filename,
    purpose: file.purpose,
    status: "processed",
    status_details: null,
  };
}

/** OpenAI's batch object. */
export function toWireBatch(row: BatchRow): WireBatch {
  const errors: WireBatch["errors"] = row.errors === null ? null : listOf(JSON.parse(row.errors) as LineError[]);
  return {
    id: row.id,
    object: "batch",
    endpoint: row.endpoint,
    errors,
    input_file_id: row.input_file_id,
    completion_window: row.completion_window,
    status: row.status,
    output_file_id: row.output_file_id,
    error_file_id: row.error_file_id,
    created_at: seconds(row.created_at),
    in_progress_at: seconds(row.in_progress_at),
    expires_at: seconds(row.expires_at),
    finalizing_at: seconds(row.finalizing_at),
    completed_at: seconds(row.completed_at),
    failed_at: seconds(row.failed_at),
    expired_at: seconds(row.expired_at),
    cancelling_at: seconds(row.cancelling_at),
    cancelled_at: seconds(row.cancelled_at),
    request_counts: { total: Number(row.total), completed: Number(row.completed), failed: Number(row.failed) },
    metadata: row.metadata === null ? null : (JSON.parse(row.metadata) as Record<string, string>),
  };
}
