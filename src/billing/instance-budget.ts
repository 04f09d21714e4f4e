/**
 * Dedicated instance time against the spend budget of the key that created the deployment, as
 * tokens are held and settled for requests (billing/budgets.ts): each running instance holds one
 * billed segment's price ahead in budget_reservations (keyed by its instance id); when a segment is
 * billed its price is added to the key's spent_usd and the next segment is held. A next segment the
 * budget cannot cover is not held: the deployment's instances are then stopped. Exact decimals.
 */
import { InsufficientQuota } from "../errors.js";
import type { Database } from "../storage/database.js";
import { Dec, parseNonNegative, toText } from "./decimal.js";

interface BudgetState {
  budget: string | null;
  spent: string;
  /** Live holds of the key's requests and instances, less `excluding`'s own. */
  held: string;
}

/** Locks the key row (as reserve() does), then reads what its budget has left. */
async function budgetState(tx: Database, keyId: string, excluding: string | null): Promise<BudgetState | null> {
  const [key] = await tx.query<{ budget_usd: string | null; spent_usd: string }>(
    "SELECT budget_usd, spent_usd FROM api_keys WHERE id = $1 FOR UPDATE",
    [keyId],
  );
  if (!key) return null;
  const [live] = await tx.query<{ total: string }>(
    "SELECT COALESCE(sum(amount_usd), 0)::text AS total FROM budget_reservations WHERE key_id = $1 AND expires_at > now() AND request_id IS DISTINCT FROM $2",
    [keyId, excluding],
  );
  return { budget: key.budget_usd, spent: key.spent_usd, held: live?.total ?? "0" };
}

function covers(state: BudgetState, amountUsd: string): boolean {
  if (state.budget === null) return true;
  return Dec(state.spent).plus(Dec(state.held)).plus(parseNonNegative(amountUsd, "amountUsd")).lte(Dec(state.budget));
}

function refusal(state: BudgetState, amountUsd: string, what: string): InsufficientQuota {
  return new InsufficientQuota(
    `This API key's spend budget cannot cover ${what}: budget $${toText(Dec(state.budget ?? "0"))}, spent $${toText(Dec(state.spent))}, ` +
      `$${toText(Dec(state.held))} held, and it needs $${toText(Dec(amountUsd))} ahead. Ask an administrator to raise the key's budget.`,
  );
}

/** A 402 unless the key's budget has `amountUsd` left (holds nothing): the check before creating or scaling up. */
export async function assertBudgetCovers(db: Database, keyId: string, amountUsd: string, what: string): Promise<void> {
  await db.transaction(async (tx) => {
    const state = await budgetState(tx, keyId, null);
    if (state && !covers(state, amountUsd)) throw refusal(state, amountUsd, what);
  });
}

/** Holds one segment for an instance about to load; a 402 (InsufficientQuota) when the budget cannot cover it. */
export async function holdInstanceTime(db: Database, keyId: string, instanceId: string, amountUsd: string, holdMs: number): Promise<void> {
  await db.transaction(async (tx) => {
    const state = await budgetState(tx, keyId, instanceId);
    if (!state || state.budget === null) return;
    if (!covers(state, amountUsd)) throw refusal(state, amountUsd, "another instance's next billed segment");
    await putHold(tx, keyId, instanceId, amountUsd, holdMs);
  });
}

/**
 * Inside the transaction that billed an instance's segments: adds their price to the key's spend,
 * then holds the next segment (`next`), or drops the hold once the instance has ended. Returns false
 * when the budget cannot cover the next segment (the hold is dropped: the instance must stop).
 */
export async function settleInstanceTime(
  tx: Database,
  keyId: string,
  instanceId: string,
  billedUsd: string,
  next: { amountUsd: string; holdMs: number } | null,
): Promise<boolean> {
  const state = await budgetState(tx, keyId, instanceId);
  await tx.query("UPDATE api_keys SET spent_usd = spent_usd + $2::numeric WHERE id = $1", [
    keyId,
    toText(parseNonNegative(billedUsd, "billedUsd")),
  ]);
  await tx.query("DELETE FROM budget_reservations WHERE request_id = $1", [instanceId]);
  if (!state || !next || state.budget === null) return true;
  const after = { ...state, spent: toText(Dec(state.spent).plus(Dec(billedUsd))) };
  if (!covers(after, next.amountUsd)) return false;
  await putHold(tx, keyId, instanceId, next.amountUsd, next.holdMs);
  return true;
}

async function putHold(tx: Database, keyId: string, instanceId: string, amountUsd: string, holdMs: number): Promise<void> {
  await tx.query(
    `INSERT INTO budget_reservations (request_id, key_id, amount_usd, expires_at) VALUES ($1, $2, $3::numeric, now() + make_interval(secs => $4::double precision / 1000))
     ON CONFLICT (request_id) DO UPDATE SET amount_usd = EXCLUDED.amount_usd, expires_at = EXCLUDED.expires_at`,
    [instanceId, keyId, toText(parseNonNegative(amountUsd, "amountUsd")), holdMs],
  );
}

/** An instance that never ran (its load failed, or its deployment went away meanwhile) gives its hold back. */
export async function releaseInstanceHold(db: Database, instanceId: string): Promise<void> {
  await db.query("DELETE FROM budget_reservations WHERE request_id = $1", [instanceId]);
}
