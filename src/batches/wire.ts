import type { StoredFile } from "../storage/files.js";
import type { BatchRow } from "./batch-store.js";
import type { LineError } from "./validate.js";

const seconds = (date: Date | null) => (date === null ? null : Math.floor(new Date(date).getTime() / 1000));

/** OpenAI's file object. Files here are processed when they are stored and kept until deleted. */
export function toWireFile(file: StoredFile) {
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
export function toWireBatch(row: BatchRow) {
  const errors = row.errors === null ? null : { object: "list", data: JSON.parse(row.errors) as LineError[] };
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

/** One line of an output or error file, in OpenAI's format. */
export interface ResultLine {
  id: string;
  custom_id: string | null;
  response: { status_code: number; request_id: string | null; body: unknown } | null;
  error: { code: string; message: string; line?: number } | null;
}
