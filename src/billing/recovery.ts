/**
 * Closing the rows of a server process that died (see processes/owners.ts for who owns what).
 *
 * A dead owner's `in_flight` rows are billed for what they delivered (their completion_tokens is
 * written ahead of delivery, see in-flight.ts), marked `interrupted`, and their budget reservations
 * turned into spend, all in one transaction per owner.
 */
import type { TokenPrices } from "../catalog/types.js";
import type { Database } from "../storage/database.js";
import { ownerIsDead, type DeadOwnersClosed, type Owner } from "../processes/owners.js";
import { requestCost } from "./cost.js";
import { chargeReservation } from "./budgets.js";

/** Closes the in-flight rows of every dead owner, and of rows whose owner is unknown. */
export async function reconcileDeadOwners(db: Database, self: Owner): Promise<DeadOwnersClosed> {
  const result: DeadOwnersClosed = { owners: 0, rows: 0 };
  const owners = await db.query<{ id: string; lock_key: string }>(
    "SELECT id, lock_key::text AS lock_key FROM server_owners WHERE id <> $1",
    [self.id],
  );
  for (const owner of owners) {
    await db.transaction(async (tx) => {
      if (!(await ownerIsDead(tx, self, owner))) return;
      result.rows += await closeRows(tx, "owner_id = $1", [owner.id]);
      await tx.query("DELETE FROM server_owners WHERE id = $1", [owner.id]);
      result.owners++;
    });
  }
  // Rows whose owner row is gone (or never was) have no live process behind them either.
  result.rows += await db.transaction((tx) =>
    closeRows(tx, "(owner_id IS NULL OR NOT EXISTS (SELECT 1 FROM server_owners o WHERE o.id = usage_records.owner_id))", []),
  );
  return result;
}

interface InFlightRow {
  request_id: string;
  key_id: string;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  prices: string | null;
  batch_id: string | null;
}

async function closeRows(tx: Database, where: string, params: unknown[]): Promise<number> {
  // FOR UPDATE, and the status test again after the lock: a concurrent reconciler's rows are skipped.
  const rows = await tx.query<InFlightRow>(
    `SELECT request_id, key_id, prompt_tokens, cached_tokens, completion_tokens, prices, batch_id
       FROM usage_records WHERE status = 'in_flight' AND ${where} FOR UPDATE`,
    params,
  );
  for (const row of rows) {
    // A batch line's attempt cut short is not billed: the line runs again and is billed once, for the answer it keeps.
    const cost =
      row.completion_tokens > 0 && row.prices && !row.batch_id
        ? requestCost(JSON.parse(row.prices) as TokenPrices, {
            promptTokens: row.prompt_tokens,
            cachedPromptTokens: row.cached_tokens,
            completionTokens: row.completion_tokens,
          })
        : "0";
    await chargeReservation(tx, row.key_id, row.request_id, cost);
    await tx.query(
      `UPDATE usage_records
          SET status = 'interrupted', cost_usd = $2::numeric, error_code = 'server_interrupted',
              duration_ms = LEAST(2147483647, GREATEST(0, (extract(epoch FROM now() - created_at) * 1000)::bigint))
        WHERE request_id = $1 AND status = 'in_flight'`,
      [row.request_id, cost],
    );
  }
  return rows.length;
}
