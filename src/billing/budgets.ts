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
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1)
    throw new RangeError(`reservationTtlSeconds must be a positive integer, got ${ttlSeconds}`);

  return {
    async reserve({ keyId, requestId, amountUsd }) {
      const amount = parseNonNegative(amountUsd, "amountUsd");
      // Every key reserves, budget or not: the settled reservation is what counts its spend, so a key
      // given a budget later is held to what it has really spent. A key without a budget has nothing
      // to check: one statement inserts its reservation (no transaction, no row lock); a key with one
      // is checked under its row lock.
      const values = [requestId, keyId, toText(amount), ttlSeconds];
      const unchecked = await db.query(
        `WITH q (request_id, key_id, reserve_usd) AS (VALUES ($1::text, $2::text, $3::numeric)) ${reservingUnbudgeted("q", "$4")}`,
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
          settling = chargeReservation(db, keyId, requestId, toText(actual)).catch((error: unknown) => {
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

/**
 * The SQL that reserves `reserve_usd` for each request of `requests` (a relation with `request_id`,
 * `key_id` and `reserve_usd`, NULL: nothing to reserve) whose key has no budget: nothing to check,
 * so no transaction, no row lock. A request whose key has a budget gets nothing here (and is not
 * among the request ids returned): that key is checked under its row lock instead (`reserve`).
 * `ttlSeconds`: the placeholder for the reservations' lifetime in seconds.
 */
export function reservingUnbudgeted(requests: string, ttlSeconds: string): string {
  return `INSERT INTO budget_reservations (request_id, key_id, amount_usd, expires_at)
          SELECT q.request_id, k.id, q.reserve_usd, now() + make_interval(secs => ${ttlSeconds})
            FROM ${requests} q JOIN api_keys k ON k.id = q.key_id AND k.budget_usd IS NULL
           WHERE q.reserve_usd IS NOT NULL
          RETURNING request_id`;
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
 * The SQL (a WITH list) that turns each request's reservation into spend of its actual cost, never
 * more than was reserved (that is what kept concurrent requests from overshooting), and drops it.
 * `requests` names a relation with `request_id`, `key_id` and `cost_usd`. It charges only the
 * reservations still there, so a request is charged once even when both its own final row and a
 * crash reconciliation reach it. Within one statement it is atomic with whatever the statement
 * does besides (the usage ledger writes the requests' final rows in the same one): a reserve
 * checking a key's budget under its row lock sees the reservation and the spend both before it, or
 * both after (the UPDATE waits for that lock; the DELETE is invisible until commit). A key's
 * charges are summed first: one statement updates a row once.
 * With them go the keys' reservations expired a day ago: expired ones no longer count (checkBudget),
 * and are kept a day so that a request that outlived its reservation still finds it and is charged
 * once. Swept here, after the response, not in reserve(), on the way to the first token.
 * `unreserved`: a query of `(key_id, amount)` charged as they are, for requests that held no
 * reservation (the caller makes sure each is charged once); one UPDATE takes both kinds of charge.
 */
export function chargingReservations(requests: string, unreserved?: string): string {
  const direct = unreserved ? `UNION ALL ${unreserved}` : "";
  return `removed_reservations AS (
       DELETE FROM budget_reservations r USING ${requests} q
        WHERE r.request_id = q.request_id OR (r.key_id = q.key_id AND r.expires_at <= now() - interval '1 day')
       RETURNING r.request_id, r.key_id, r.amount_usd),
     charged_keys AS (
       UPDATE api_keys SET spent_usd = spent_usd + c.amount
         FROM (SELECT charges.key_id, sum(charges.amount) AS amount
                 FROM (SELECT removed.key_id, LEAST(q.cost_usd, removed.amount_usd) AS amount
                         FROM removed_reservations removed JOIN ${requests} q ON q.request_id = removed.request_id
                       ${direct}) charges
                GROUP BY charges.key_id) c
        WHERE api_keys.id = c.key_id)`;
}

/** Charges a request's reservation with no ledger row to write (see chargingReservations). */
export async function chargeReservation(db: Database, keyId: string, requestId: string, actualUsd: string): Promise<void> {
  await db.query(
    `WITH q (request_id, key_id, cost_usd) AS (VALUES ($1::text, $2::text, $3::numeric)), ${chargingReservations("q")} SELECT 1`,
    [requestId, keyId, toText(parseNonNegative(actualUsd, "actualUsd"))],
  );
}

/** What a key may still spend: budget − spent − held by requests in flight, never below zero. Exact. */
export function remainingBudget(budgetUsd: string, spentUsd: string, reservedUsd: string): string {
  const left = Dec(budgetUsd).minus(Dec(spentUsd)).minus(Dec(reservedUsd));
  return left.lt(Dec("0")) ? "0" : toText(left);
}

/**
 * Throws InsufficientQuota when the key has a budget and nothing of it is left (spent and held by
 * requests in flight): what is not metered in tokens (a file upload) still needs a key in credit.
 */
export async function requireBudgetLeft(db: Database, keyId: string): Promise<void> {
  const rows = await db.query<{ budget_usd: string | null; spent_usd: string; held: string }>(
    `SELECT k.budget_usd, k.spent_usd,
            (SELECT COALESCE(sum(amount_usd), 0) FROM budget_reservations r WHERE r.key_id = k.id AND r.expires_at > now()) AS held
       FROM api_keys k WHERE k.id = $1`,
    [keyId],
  );
  const key = rows[0];
  if (!key || key.budget_usd === null) return;
  const [budget, spent, held] = [Dec(key.budget_usd), Dec(key.spent_usd), Dec(key.held)];
  if (spent.plus(held).gte(budget)) {
    throw new InsufficientQuota(
      `This API key has no spend budget left (budget $${toText(budget)}, spent $${toText(spent)}, $${toText(held)} held by requests in flight). Ask an administrator to raise the key's budget.`,
    );
  }
}
