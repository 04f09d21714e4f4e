import type { z } from "zod";
import { chatRequestSchema } from "../protocol/chat-request.js";
import { completionsRequestSchema } from "../protocol/completions-request.js";
import { embeddingsRequestSchema } from "../protocol/embeddings-request.js";
import { responsesRequestSchema } from "../protocol/responses-request.js";
import { MAX_IDENTIFIER_CHARS } from "../protocol/identifiers.js";

/** The endpoints a batch may run, as OpenAI names them. */
export const BATCH_ENDPOINTS = ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings"] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

const SCHEMAS: Record<BatchEndpoint, z.ZodType> = {
  "/v1/chat/completions": chatRequestSchema,
  "/v1/completions": completionsRequestSchema,
  "/v1/responses": responsesRequestSchema,
  "/v1/embeddings": embeddingsRequestSchema,
};

/** One valid request line of a batch's input file. */
export interface BatchLine {
  /** 1-based, as an editor counts lines. */
  line: number;
  customId: string;
  /** The request body, as JSON text. */
  body: string;
  /** What the line counts against the account's enqueued-token cap: its body's size / 4, plus its output cap. */
  estimatedTokens: number;
}

/** Why a line was refused: OpenAI's batch `errors.data` entry. */
export interface LineError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

export type Validation = { ok: true; lines: BatchLine[] } | { ok: false; errors: LineError[] };

/** At most this many line errors are reported; the first ones say enough to fix the file. */
const MAX_REPORTED_ERRORS = 1000;

/**
 * Checks a batch input file: UTF-8 JSONL, one request per non-empty line, each an object with a
 * `custom_id` unique in the file, `method` POST, `url` the batch's endpoint, and a `body` that is a
 * valid request for that endpoint (without `stream`). Every bad line is reported with its number.
 */
export function validateBatchFile(content: Buffer, endpoint: BatchEndpoint, maxLines: number): Validation {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(content);
  } catch {
    return { ok: false, errors: [{ code: "invalid_file_format", message: "The file is not valid UTF-8 text.", param: null, line: null }] };
  }
  const lines: BatchLine[] = [];
  const errors: LineError[] = [];
  const seen = new Set<string>();
  const raw = text.split("\n");
  for (let index = 0; index < raw.length && errors.length < MAX_REPORTED_ERRORS; index++) {
    const source = raw[index]!.trim();
    if (source === "") continue;
    const result = checkLine(source, index + 1, endpoint, seen);
    if ("code" in result) errors.push(result);
    else lines.push(result);
  }
  if (errors.length > 0) return { ok: false, errors };
  if (lines.length === 0) return { ok: false, errors: [{ code: "empty_file", message: "The file holds no requests.", param: null, line: null }] };
  if (lines.length > maxLines) {
    return { ok: false, errors: [{ code: "too_many_requests", message: `The file holds ${lines.length} requests; a batch may hold at most ${maxLines}.`, param: null, line: null }] };
  }
  return { ok: true, lines };
}

function checkLine(source: string, line: number, endpoint: BatchEndpoint, seen: Set<string>): BatchLine | LineError {
  const fail = (code: string, message: string, param: string | null = null): LineError => ({ code, message: `Line ${line}: ${message}`, param, line });
  let request: unknown;
  try {
    request = JSON.parse(source);
  } catch {
    return fail("invalid_json_line", "not valid JSON.");
  }
  if (typeof request !== "object" || request === null || Array.isArray(request)) return fail("invalid_request", "must be a JSON object.");
  const { custom_id: customId, method, url, body } = request as Record<string, unknown>;
  if (typeof customId !== "string" || customId === "") return fail("missing_required_parameter", "'custom_id' must be a non-empty string.", "custom_id");
  if (customId.length > MAX_IDENTIFIER_CHARS) return fail("invalid_value", `'custom_id' is longer than ${MAX_IDENTIFIER_CHARS} characters.`, "custom_id");
  if (seen.has(customId)) return fail("duplicate_custom_id", `the custom_id '${customId}' appears on an earlier line; each must be unique in the file.`, "custom_id");
  seen.add(customId);
  if (method !== "POST") return fail("invalid_value", "'method' must be \"POST\".", "method");
  if (url !== endpoint) return fail("mismatched_url", `'url' must be the batch's endpoint, ${endpoint}.`, "url");
  if (typeof body !== "object" || body === null || Array.isArray(body)) return fail("missing_required_parameter", "'body' must be a JSON object.", "body");
  if ((body as Record<string, unknown>).stream === true) return fail("invalid_value", "batch requests cannot stream; remove 'body.stream'.", "body.stream");
  const parsed = SCHEMAS[endpoint].safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const param = ["body", ...issue.path.map(String)].join(".");
    return fail("invalid_request", `'${param}': ${issue.message}`, param);
  }
  const text = JSON.stringify(body);
  return { line, customId, body: text, estimatedTokens: Math.ceil(text.length / 4) + outputCap(body as Record<string, unknown>) };
}

/** The line's own cap on output tokens, where it sets one. */
function outputCap(body: Record<string, unknown>): number {
  for (const key of ["max_completion_tokens", "max_tokens", "max_output_tokens"]) {
    const value = body[key];
    if (typeof value === "number" && Number.isInteger(value) && value > 0) return value;
  }
  return 0;
}
