import { InsufficientQuota } from "../errors.js";
import type { BudgetReservation, SpendBudgets } from "./ports.js";
import type { Database } from "../storage/database.js";
import { Dec, parseNonNegative, toText, type Decimal } from "./decimal.js";

export interface SpendBudgetsOptions {
  /**
   * How long a reservation holds budget if it is never settled (its server crashed, say). After
   * that it no longer counts. Longer than any request runs; default one hour.
   */
  reservationTtlSeconds?: number;
}

export const DEFAULT_RESERVATION_TTL_SECONDS = 60 * 60;

/**
 * Per-key spend budgets: api_keys.budget_usd (null: unlimited) against spent_usd plus the live
 * budget_reservations of requests in flight. Every request reserves and settles, so spent_usd counts
 * the spend of keys without a budget too. All amounts are exact decimals (numeric in SQL, strings
 * here).
 *
 * reserve() locks a budgeted key's row (SELECT ... FOR UPDATE) inside a transaction, so on PostgreSQL
 * the reservations of one key are checked and inserted one at a time across every server process;
 * PGlite runs one transaction at a time anyway. settle() charges the actual cost and drops the
 * reservation in one statement.
 */
export function createSpendBudgets(db: Database, options: SpendBudgetsOptions = {}): SpendBudgets {
  const ttlSeconds = options.reservationTtlSeconds ?? DEFAULT_RESERVATION_TTL_SECONDS;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1) throw new RangeError(`reservationTtlSeconds must be a positive integer, got ${ttlSeconds}`);

  return {
    async reserve({ keyId, requestId, amountUsd }) {
      const amount = parseNonNegative(amountUsd, "amountUsd");
      // Every key reserves, budget or not: the settled reservation is what counts its spend, so a key
      // given a budget later is held to what it has really spent. A key without a budget has nothing
      // to check: one statement inserts its reservation (no transaction, no row lock); a key with one
      // is checked under its row lock.
      const values = [requestId, keyId, toText(amount), ttlSeconds];
      const unchecked = await db.query(
        `INSERT INTO budget_reservations (request_id, key_id, amount_usd, expires_at)
         SELECT $1, id, $3::numeric, now() + make_interval(secs => $4) FROM api_keys WHERE id = $2 AND budget_usd IS NULL
         RETURNING request_id`,
        values,
      );
      if (unchecked.length === 0) {
        await db.transaction(async (tx) => {
          const keys = await tx.query<{ budget_usd: string | null; spent_usd: string }>(
            "SELECT budget_usd, spent_usd FROM api_keys WHERE id = $1 FOR UPDATE",
            [keyId],
          );
          const key = keys[0];
          if (!key) throw new Error(`No API key with id '${keyId}' to reserve budget against.`);
          if (key.budget_usd !== null) await checkBudget(tx, keyId, key.budget_usd, key.spent_usd, amount);
          await tx.query(
            "INSERT INTO budget_reservations (request_id, key_id, amount_usd, expires_at) VALUES ($1, $2, $3::numeric, now() + make_interval(secs => $4))",
            values,
          );
        });
      }

      let settling: Promise<void> | null = null;
      const reservation: BudgetReservation = {
        async settle(actualUsd) {
          // Once only: a second call waits for the first. A failed settle may be retried.
          if (settling) return settling;
          const actual = parseNonNegative(actualUsd, "actualUsd");
          settling = chargeReservation(db, keyId, requestId, toText(actual))
            .catch((error: unknown) => {
              settling = null;
              throw error;
            });
          return settling;
        },
      };
      return reservation;
    },
  };
}

/** Throws InsufficientQuota unless `amount` fits in what the key's budget has left. Runs under the key's row lock. */
async function checkBudget(tx: Database, keyId: string, budgetUsd: string, spentUsd: string, amount: Decimal): Promise<void> {
  // A separate statement, after the lock: under READ COMMITTED it sees every reservation committed
  // by whoever held the lock before us. (A subquery in the locking statement would read the
  // snapshot from before the wait, and concurrent requests could overshoot.)
  const live = await tx.query<{ total: string }>(
    "SELECT COALESCE(sum(amount_usd), 0) AS total FROM budget_reservations WHERE key_id = $1 AND expires_at > now()",
    [keyId],
  );
  const budget = Dec(budgetUsd);
  const spent = Dec(spentUsd);
  const held = Dec(live[0]?.total ?? "0");
  if (spent.plus(held).plus(amount).gt(budget)) {
    throw new InsufficientQuota(
      `This API key has exceeded its spend budget: budget $${toText(budget)}, spent $${toText(spent)}, ` +
        `$${toText(held)} held by requests in flight, and this request may cost up to $${toText(amount)}. ` +
        "Ask an administrator to raise the key's budget.",
    );
  }
}

/**
 * Turns a request's reservation into spend of `actualUsd`, never more than was reserved (that is
 * what kept concurrent requests from overshooting), and drops it. Charges only if the reservation
 * is still there, so a request is charged once even when both its own settle and a crash
 * reconciliation reach it. One statement, so atomic on its own or inside the caller's transaction:
 * a reserve checking the key's budget under its row lock sees the reservation and the spend both
 * before it, or both after (the UPDATE waits for that lock; the DELETE is invisible until commit).
 */
export async function chargeReservation(db: Database, keyId: string, requestId: string, actualUsd: string): Promise<void> {
  // With it go the key's reservations expired a day ago: expired ones no longer count (checkBudget),
  // and are kept a day so that a request that outlived its reservation still finds it and is charged
  // once. Swept here, after the response, not in reserve(), on the way to the first token.
  await db.query(
    `WITH removed AS (
       DELETE FROM budget_reservations WHERE request_id = $1 OR (key_id = $2 AND expires_at <= now() - interval '1 day')
       RETURNING request_id, amount_usd)
     UPDATE api_keys SET spent_usd = spent_usd + LEAST($3::numeric, removed.amount_usd)
       FROM removed WHERE api_keys.id = $2 AND removed.request_id = $1`,
    [requestId, keyId, toText(parseNonNegative(actualUsd, "actualUsd"))],
  );
}

/** What a key may still spend: budget − spent − held by requests in flight, never below zero. Exact. */
export function remainingBudget(budgetUsd: string, spentUsd: string, reservedUsd: string): string {
  const left = Dec(budgetUsd).minus(Dec(spentUsd)).minus(Dec(reservedUsd));
  return left.lt(Dec("0")) ? "0" : toText(left);
}
