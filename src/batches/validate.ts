import type { z } from "zod";
import { MAX_IDENTIFIER_CHARS } from "../protocol/identifiers.js";
import { DEFAULT_MAX_JSON_DEPTH, findBodyFault } from "../protocol/body-faults.js";
import type { LineError } from "../protocol/batches-response.js";
import { innermostIssue } from "../protocol/zod-issues.js";
import { bulkPace } from "../storage/bulk-pace.js";

/**
 * An endpoint a batch may run: its URL as OpenAI names it (`/v1/chat/completions`) and its body's
 * schema. The list is api/'s batchable declarations (api/registry.ts), handed in at start
 * (cli/batch-runtime.ts), so batches/ imports nothing of api/.
 */
export interface BatchEndpoint {
  url: string;
  body: z.ZodType;
}

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

export type Validation = { ok: true; lines: BatchLine[] } | { ok: false; errors: LineError[] };

/** At most this many line errors are reported; the first ones say enough to fix the file. */
const MAX_REPORTED_ERRORS = 1000;

/**
 * Checks a batch input file: UTF-8 JSONL, one request per non-empty line, each an object with a
 * `custom_id` unique in the file, `method` POST, `url` the batch's endpoint, and a `body` that is a
 * valid request for that endpoint (without `stream`). Every bad line is reported with its number.
 * Whole, at once: small files (and tests); `checkBatchFile` checks a stored file as it is read.
 */
export function validateBatchFile(content: Buffer, endpoint: BatchEndpoint, maxLines: number): Validation {
  const checker = new LineChecker(endpoint, maxLines);
  const lines = checker.push(content, true);
  const errors = checker.finish();
  return errors.length > 0 ? { ok: false, errors } : { ok: true, lines };
}

/**
 * Checks a file read chunk by chunk, paced as bulk work (storage/bulk-pace.ts); yields the
 * valid lines a slice at a time (to be stored as they come) and returns the errors, if any. It stops
 * reading at the first sign the file is refused whole (too many lines, not UTF-8, enough errors).
 */
export async function* checkBatchFile(
  chunks: AsyncIterable<Uint8Array>,
  endpoint: BatchEndpoint,
  maxLines: number,
): AsyncGenerator<BatchLine[], LineError[]> {
  const checker = new LineChecker(endpoint, maxLines);
  for await (const chunk of chunks) {
    for (let offset = 0; offset < chunk.byteLength && !checker.stopped;) {
      // A few KiB at a time: each piece is checked, then the slice's clock is read.
      const piece = chunk.subarray(offset, offset + 16 * 1024);
      offset += piece.byteLength;
      const lines = checker.push(piece, false);
      if (lines.length > 0) yield lines;
      await bulkPace();
    }
    if (checker.stopped) break;
  }
  const last = checker.push(new Uint8Array(0), true);
  if (last.length > 0) yield last;
  return checker.finish();
}

/** The line-by-line check, fed bytes as they come: a line is checked once its newline (or the end) arrives. */
class LineChecker {
  private readonly decoder = new TextDecoder("utf-8", { fatal: true });
  private readonly seen = new Set<string>();
  private readonly errors: LineError[] = [];
  private carry = "";
  private lineNumber = 0;
  private valid = 0;
  /** The file is refused whole already: what follows cannot change the answer. */
  stopped = false;

  constructor(
    private readonly endpoint: BatchEndpoint,
    private readonly maxLines: number,
  ) {}

  push(bytes: Uint8Array, end: boolean): BatchLine[] {
    if (this.stopped) return [];
    let text: string;
    try {
      text = this.carry + this.decoder.decode(bytes, { stream: !end });
    } catch {
      return this.refuse({ code: "invalid_file_format", message: "The file is not valid UTF-8 text.", param: null, line: null });
    }
    const raw = text.split("\n");
    this.carry = end ? "" : raw.pop()!;
    const lines: BatchLine[] = [];
    for (const source of raw) {
      this.lineNumber++;
      const trimmed = source.trim();
      if (trimmed === "") continue;
      const result = checkLine(trimmed, this.lineNumber, this.endpoint, this.seen);
      if ("code" in result) this.errors.push(result);
      else if (++this.valid > this.maxLines) return this.refuse(tooManyLines(this.maxLines));
      else if (this.errors.length === 0) lines.push(result);
      if (this.errors.length >= MAX_REPORTED_ERRORS) this.stopped = true;
      if (this.stopped) break;
    }
    return this.errors.length === 0 ? lines : [];
  }

  finish(): LineError[] {
    if (this.errors.length > 0) return this.errors;
    if (this.valid === 0) return [{ code: "empty_file", message: "The file holds no requests.", param: null, line: null }];
    return [];
  }

  private refuse(error: LineError): [] {
    this.errors.splice(0, this.errors.length, error);
    this.stopped = true;
    return [];
  }
}

const tooManyLines = (maxLines: number): LineError => ({
  code: "too_many_requests",
  message: `The file holds more than ${maxLines} requests; a batch may hold at most ${maxLines}.`,
  param: null,
  line: null,
});

function checkLine(source: string, line: number, endpoint: BatchEndpoint, seen: Set<string>): BatchLine | LineError {
  const fail = (code: string, message: string, param: string | null = null): LineError => ({
    code,
    message: `Line ${line}: ${message}`,
    param,
    line,
  });
  let request: unknown;
  try {
    request = JSON.parse(source);
  } catch {
    return fail("invalid_json_line", "not valid JSON.");
  }
  if (typeof request !== "object" || request === null || Array.isArray(request)) return fail("invalid_request", "must be a JSON object.");
  // What a request's own body may not hold (nesting past the bound, NUL, lone surrogates), before any walk over it.
  const fault = findBodyFault(request, DEFAULT_MAX_JSON_DEPTH + 1);
  if (fault) return fail(fault.code, fault.message, fault.param || null);
  const { custom_id: customId, method, url, body } = request as Record<string, unknown>;
  if (typeof customId !== "string" || customId === "")
    return fail("missing_required_parameter", "'custom_id' must be a non-empty string.", "custom_id");
  if (customId.length > MAX_IDENTIFIER_CHARS)
    return fail("invalid_value", `'custom_id' is longer than ${MAX_IDENTIFIER_CHARS} characters.`, "custom_id");
  if (seen.has(customId))
    return fail(
      "duplicate_custom_id",
      `the custom_id '${customId}' appears on an earlier line; each must be unique in the file.`,
      "custom_id",
    );
  seen.add(customId);
  if (method !== "POST") return fail("invalid_value", "'method' must be \"POST\".", "method");
  if (url !== endpoint.url) return fail("mismatched_url", `'url' must be the batch's endpoint, ${endpoint.url}.`, "url");
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return fail("missing_required_parameter", "'body' must be a JSON object.", "body");
  if ((body as Record<string, unknown>).stream === true)
    return fail("invalid_value", "batch requests cannot stream; remove 'body.stream'.", "body.stream");
  const parsed = endpoint.body.safeParse(body);
  if (!parsed.success) {
    const issue = innermostIssue(parsed.error.issues[0]!);
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
