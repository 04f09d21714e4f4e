import { remainingBudget } from "../billing/budgets.js";
import type { Database } from "../storage/database.js";
import { toKeyGrants, type KeyGrantColumns } from "./key-row.js";
import type { KeyRights } from "./key-rights.js";

/** A key's stored rights and how much of its budget is used, as the account-scoped key API weighs them. */
export interface KeyStanding {
  manageKeys: boolean;
  manageDeployments: boolean;
  allowedModels: string[] | null;
  /** The key's own limits; null: the server default. */
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  budgetUsd: string | null;
  spentUsd: string;
  /** Held by this key's requests in flight. */
  reservedUsd: string;
  expiresAt: Date | null;
}

/** The server-wide per-key rate limits that apply where a key sets none; null: unlimited. */
export interface RateDefaults {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
}

export const UNLIMITED_RATES: RateDefaults = { requestsPerMinute: null, tokensPerMinute: null };

/** The key's standing, or null when no key of `accountId` has that id. */
export async function loadKeyStanding(db: Database, keyId: string, accountId: string): Promise<KeyStanding | null> {
  if (keyId.includes("\u0000")) return null; // PostgreSQL refuses a NUL as a parameter; no id holds one
  const rows = await db.query<KeyGrantColumns & { spent_usd: string; reserved_usd: string; expires_at: Date | null }>(
    `SELECT k.manage_keys, k.manage_deployments, k.allowed_models, k.rpm_limit, k.tpm_limit, k.budget_usd::text AS budget_usd, k.spent_usd::text AS spent_usd,
            (SELECT COALESCE(sum(r.amount_usd), 0)::text FROM budget_reservations r WHERE r.key_id = k.id AND r.expires_at > now()) AS reserved_usd,
            k.expires_at
       FROM api_keys k
      WHERE k.id = $1 AND k.account_id = $2`,
    [keyId, accountId],
  );
  const row = rows[0];
  if (!row) return null;
  return {
    ...toKeyGrants(row),
    spentUsd: row.spent_usd,
    reservedUsd: row.reserved_usd,
    expiresAt: row.expires_at,
  };
}

/**
 * A key's rights for comparison. `budget` says which amount counts: what is `left` of it (what a key
 * it creates may be given), or its whole `ceiling` (to compare with another key's whole budget).
 */
export function rightsOf(standing: KeyStanding, defaults: RateDefaults, budget: "left" | "ceiling"): KeyRights {
  return {
    manageKeys: standing.manageKeys,
    manageDeployments: standing.manageDeployments,
    allowedModels: standing.allowedModels,
    budgetUsd:
      standing.budgetUsd === null
        ? null
        : budget === "left"
          ? remainingBudget(standing.budgetUsd, standing.spentUsd, standing.reservedUsd)
          : standing.budgetUsd,
    requestsPerMinute: standing.requestsPerMinute ?? defaults.requestsPerMinute,
    tokensPerMinute: standing.tokensPerMinute ?? defaults.tokensPerMinute,
    expiresAt: standing.expiresAt,
  };
}
