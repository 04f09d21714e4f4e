import type { Database } from "./database.js";

/** How many objects kept with `store: true` an account may have, and for how long (settings.storedObjects). */
export interface StoredObjectLimits {
  perAccount: number;
  retentionDays: number;
}

/** The tables that keep such objects, each with the column that orders an account's objects by age. */
const AGE_ORDER = { chat_completions: "seq", responses: "created_at" } as const;

/** SQL that admits only objects still within the retention period (`$n`: the days). */
export const unexpired = (daysParam: number) => `created_at > now() - make_interval(days => $${daysParam})`;

/**
 * After a save: the account's expired objects go, and past its cap the oldest go, so one account
 * can neither grow its table without bound nor keep objects past the retention period.
 */
export async function pruneStored(
  db: Database,
  table: keyof typeof AGE_ORDER,
  accountId: string,
  limits: StoredObjectLimits,
): Promise<void> {
  const order = AGE_ORDER[table];
  await db.query(
    `DELETE FROM ${table} WHERE account_id = $1 AND (NOT (${unexpired(2)})
       OR ${order} <= (SELECT ${order} FROM ${table} WHERE account_id = $1 ORDER BY ${order} DESC OFFSET $3 LIMIT 1))`,
    [accountId, limits.retentionDays, limits.perAccount],
  );
}
