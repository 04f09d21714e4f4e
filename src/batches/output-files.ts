import type { DoneLine } from "./batch-store.js";
import type { LineError, ResultLine } from "../protocol/batches-response.js";

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
 * One answered line's place in the result files, as text around its answer (the response body,
 * JSON as it was answered, spliced in unparsed: a large answer streams from storage into the file
 * without being held or parsed whole). Answered 200: the output file; any other answer, and lines
 * closed unanswered by expiry, cancellation or the storage quota, the error file.
 */
export function resultLineText(
  batchId: string,
  line: Omit<DoneLine, "answer">,
): { file: "output" | "errors"; head: string; tail: string; answered: boolean } {
  const id = `batch_req_${batchId.slice("batch_".length)}_${line.line}`;
  if (line.status_code !== null && line.error === null) {
    const head = `{"id":${JSON.stringify(id)},"custom_id":${JSON.stringify(line.custom_id)},"response":{"status_code":${line.status_code},"request_id":${JSON.stringify(line.request_id)},"body":`;
    return { file: line.status_code === 200 ? "output" : "errors", head, tail: '},"error":null}\n', answered: true };
  }
  const error = line.error
    ? (JSON.parse(line.error) as { code: string; message: string })
    : { code: "batch_line_unanswered", message: "The line was not run." };
  const whole: ResultLine = { id, custom_id: line.custom_id, response: null, error };
  return { file: "errors", head: `${JSON.stringify(whole)}\n`, tail: "", answered: false };
}

/** The output and error files' lines, parsed (what a client reads back), each line once, in input order. */
export function resultFiles(batchId: string, lines: readonly DoneLine[]): { output: ResultLine[]; errors: ResultLine[] } {
  const files: { output: ResultLine[]; errors: ResultLine[] } = { output: [], errors: [] };
  for (const line of lines) {
    const text = resultLineText(batchId, line);
    files[text.file].push(JSON.parse(text.head + (text.answered ? line.answer : "") + text.tail) as ResultLine);
  }
  return files;
}
