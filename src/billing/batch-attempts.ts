import type { Database } from "../storage/database.js";

/**
 * A batch line is billed once, for the attempt whose answer the line keeps. An attempt whose answer
 * was not kept (a crash between the ledger row and the line's answer, a retried server error) is
 * unbilled here: its row keeps its tokens, costs 0 and says why, and the key's spend is given back.
 */
export async function discardAttempt(db: Database, requestId: string): Promise<void> {
  await db.transaction((tx) => discardRows(tx, "u.request_id = $1", [requestId]));
}

/** Discards every billed attempt of the batch that no answered line keeps (run before the batch resumes). */
export async function discardUnkeptAttempts(db: Database, batchId: string): Promise<number> {
  return db.transaction((tx) =>
    discardRows(
      tx,
      "u.batch_id = $1 AND NOT EXISTS (SELECT 1 FROM batch_lines l WHERE l.batch_id = $1 AND l.done AND l.request_id = u.request_id)",
      [batchId],
    ),
  );
}

async function discardRows(tx: Database, where: string, params: unknown[]): Promise<number> {
  const rows = await tx.query<{ request_id: string; key_id: string; cost_usd: string }>(
    `SELECT u.request_id, u.key_id, u.cost_usd::text AS cost_usd FROM usage_records u
      WHERE ${where} AND u.batch_id IS NOT NULL AND u.status <> 'in_flight' AND u.cost_usd > 0 FOR UPDATE`,
    params,
  );
  for (const row of rows) {
    await tx.query("UPDATE api_keys SET spent_usd = GREATEST(0, spent_usd - $2::numeric) WHERE id = $1", [row.key_id, row.cost_usd]);
    await tx.query("UPDATE usage_records SET cost_usd = 0, error_code = 'batch_attempt_discarded' WHERE request_id = $1", [row.request_id]);
  }
  return rows.length;
}
