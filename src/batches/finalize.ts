import { bulkPace } from "../storage/bulk-pace.js";
import type { Database } from "../storage/database.js";
import type { FileStore, FileWriter } from "../storage/files.js";
import { resultLineText } from "./output-files.js";
import type { BatchStatus } from "../protocol/batches-response.js";
import { answerChunks, doneLines, dropAnswerChunks, setStatus } from "./batch-store.js";

export interface FinalizingBatch {
  id: string;
  accountId: string;
}

/** Lines read per page while the result files are written: their answers, not the batch's, are in memory. */
const LINES_PER_PAGE = 64;

/**
 * Writes the output and error files from the answered lines, streamed a page of lines at a time into
 * chunked files, then ends the batch and makes the files visible in one short transaction: a crash
 * before it commits leaves the batch `from` as it was (the half-written files are never listed and
 * are swept), and the next run writes the files again from the same lines; never two sets of files.
 * Their bytes were counted against the account's quota as the lines were answered.
 */
export async function writeResults(
  db: Database,
  files: FileStore,
  batch: FinalizingBatch,
  from: BatchStatus,
  to: BatchStatus,
): Promise<void> {
  const writers: Partial<Record<"output" | "errors", FileWriter>> = {};
  const writerFor = async (file: "output" | "errors") =>
    (writers[file] ??= await files.open(batch.accountId, {
      purpose: "batch_output",
      filename: `${batch.id}_${file === "output" ? "output" : "error"}.jsonl`,
    }));
  try {
    for (let after = 0; ;) {
      await bulkPace();
      const page = await doneLines(db, batch.id, after, LINES_PER_PAGE);
      for (const line of page) {
        const text = resultLineText(batch.id, line);
        const writer = await writerFor(text.file);
        await writer.append(Buffer.from(text.head));
        if (text.answered && line.answer_attempt) {
          for await (const chunk of answerChunks(db, batch.id, line.line, line.answer_attempt)) await writer.append(Buffer.from(chunk));
        } else if (text.answered) {
          await writer.append(Buffer.from(line.answer ?? "null"));
        }
        if (text.tail) await writer.append(Buffer.from(text.tail));
      }
      if (page.length < LINES_PER_PAGE) break;
      after = page.at(-1)!.line;
    }
    for (const writer of Object.values(writers)) await writer.flush();
    await db.transaction(async (tx) => {
      const outputFile = await writers.output?.commit(tx);
      const errorFile = await writers.errors?.commit(tx);
      const ended = await setStatus(tx, batch.id, [from], to, {
        output_file_id: outputFile?.id ?? null,
        error_file_id: errorFile?.id ?? null,
      });
      // Someone else ended it first (another process, a cancel): roll the files back.
      if (!ended) throw new BatchMoved();
    });
  } catch (error) {
    for (const writer of Object.values(writers)) await writer.abort().catch(() => {});
    throw error;
  }
  await dropAnswerChunks(db, batch.id);
}

/** The batch was not in the expected state when it was to end. */
export class BatchMoved extends Error {}

/** Where a batch found `finalizing` after a restart was going. */
export function finalTarget(batch: { cancelling_at: Date | null; expires_at: Date }): BatchStatus {
  if (batch.cancelling_at !== null) return "cancelled";
  return new Date(batch.expires_at).getTime() <= Date.now() ? "expired" : "completed";
}
