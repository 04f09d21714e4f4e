import type { DoneLine } from "./store.js";
import type { LineError } from "./validate.js";
import type { ResultLine } from "./wire.js";

export const jsonl = (lines: readonly unknown[]) => Buffer.from(lines.map((line) => `${JSON.stringify(line)}\n`).join(""), "utf8");

/** The error file of a batch that failed validation: one line per bad input line. */
export function validationErrorLines(batchId: string, errors: readonly LineError[]): ResultLine[] {
  return errors.map((error, index) => ({
    id: `batch_req_${batchId.slice("batch_".length)}_v${index}`,
    custom_id: null,
    response: null,
    error: { code: error.code, message: error.message, ...(error.line === null ? {} : { line: error.line }) },
  }));
}

/**
 * The output file (lines answered 200) and the error file (every other answer, and lines closed
 * unanswered by expiry or cancellation), each line once, in input order.
 */
export function resultFiles(batchId: string, lines: readonly DoneLine[]): { output: ResultLine[]; errors: ResultLine[] } {
  const output: ResultLine[] = [];
  const errors: ResultLine[] = [];
  for (const line of lines) {
    const id = `batch_req_${batchId.slice("batch_".length)}_${line.line}`;
    if (line.answer !== null && line.status_code !== null) {
      const result: ResultLine = { id, custom_id: line.custom_id, response: { status_code: line.status_code, request_id: line.request_id, body: JSON.parse(line.answer) as unknown }, error: null };
      (line.status_code === 200 ? output : errors).push(result);
    } else {
      const error = line.error ? (JSON.parse(line.error) as { code: string; message: string }) : { code: "batch_line_unanswered", message: "The line was not run." };
      errors.push({ id, custom_id: line.custom_id, response: null, error });
    }
  }
  return { output, errors };
}
