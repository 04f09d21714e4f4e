import type { Database } from "../storage/database.js";
import type { FileStore } from "../storage/files.js";
import { jsonl, resultFiles } from "./output.js";
import { doneLines, setStatus, type BatchStatus } from "./store.js";

export interface FinalizingBatch {
  id: string;
  accountId: string;
}

/**
 * Writes the output and error files from the answered lines and ends the batch, in one
 * transaction: a crash before it commits leaves the batch `from` as it was, and the next run
 * writes the files again from the same lines; never two sets of files.
 * Generated files do not count against the account's file caps: a batch always delivers.
 */
export async function writeResults(db: Database, files: FileStore, batch: FinalizingBatch, from: BatchStatus, to: BatchStatus): Promise<void> {
  const { output, errors } = resultFiles(batch.id, await doneLines(db, batch.id));
  await db.transaction(async (tx) => {
    const outputFile = output.length > 0 ? await files.create(batch.accountId, { purpose: "batch_output", filename: `${batch.id}_output.jsonl`, content: jsonl(output) }, tx) : null;
    const errorFile = errors.length > 0 ? await files.create(batch.accountId, { purpose: "batch_output", filename: `${batch.id}_error.jsonl`, content: jsonl(errors) }, tx) : null;
    const ended = await setStatus(tx, batch.id, [from], to, { output_file_id: outputFile?.id ?? null, error_file_id: errorFile?.id ?? null });
    // Someone else ended it first (another process, a cancel): roll the files back.
    if (!ended) throw new BatchMoved();
  });
}

/** The batch was not in the expected state when it was to end. */
export class BatchMoved extends Error {}

/** Where a batch found `finalizing` after a restart was going. */
export function finalTarget(batch: { cancelling_at: Date | null; expires_at: Date }): BatchStatus {
  if (batch.cancelling_at !== null) return "cancelled";
  return new Date(batch.expires_at).getTime() <= Date.now() ? "expired" : "completed";
}
