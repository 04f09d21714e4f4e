/**
 * The Files and Batch APIs' objects as they answer (OpenAI's), and a result file's lines. Declared
 * here so the server (batches/wire.ts builds them) and the console that reads them agree by construction.
 */
import type { WholeList } from "./list-page.js";

export type BatchStatus = "validating" | "failed" | "in_progress" | "finalizing" | "completed" | "expired" | "cancelling" | "cancelled";

/** Why a line was refused: OpenAI's batch `errors.data` entry. */
export interface LineError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

/** OpenAI's file object. Files here are processed when they are stored and kept until deleted. */
export interface WireFile {
  id: string;
  object: "file";
  bytes: number;
  /** Unix seconds. */
  created_at: number;
  expires_at: null;
  filename: string;
  purpose: string;
  status: "processed";
  status_details: null;
}

/** OpenAI's batch object; times are unix seconds, null until the batch gets there. */
export interface WireBatch {
  id: string;
  object: "batch";
  /** The URL every line runs (`/v1/chat/completions`, ...). */
  endpoint: string;
  /** The lines refused at validation (the batch then failed); null when none were. */
  errors: WholeList<LineError> | null;
  input_file_id: string;
  completion_window: string;
  status: BatchStatus;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: number;
  in_progress_at: number | null;
  expires_at: number;
  finalizing_at: number | null;
  completed_at: number | null;
  failed_at: number | null;
  expired_at: number | null;
  cancelling_at: number | null;
  cancelled_at: number | null;
  request_counts: { total: number; completed: number; failed: number };
  metadata: Record<string, string> | null;
}

/** One line of an output or error file, in OpenAI's format. */
export interface ResultLine {
  id: string;
  custom_id: string | null;
  response: { status_code: number; request_id: string | null; body: unknown } | null;
  error: { code: string; message: string; line?: number } | null;
}
