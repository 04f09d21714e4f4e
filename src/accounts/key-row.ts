/**
 * The api_keys columns that say what a key may use and spend, and their one mapping: the principal
 * (principals.ts), the key list (key-store.ts) and a key's standing (key-standing.ts) all read a
 * key's grants through it.
 */
import { addMoney } from "../billing/cost.js";

/** The grant columns as PostgreSQL returns them (numeric as text). */
export interface KeyGrantColumns {
  allowed_models: string[] | null;
  rpm_limit: number | null;
  tpm_limit: number | null;
  budget_usd: string | null;
  manage_keys: boolean;
  manage_deployments: boolean;
}

export interface KeyGrants {
  /** null: every model. */
  allowedModels: string[] | null;
  /** null: the server default applies. */
  requestsPerMinute: number | null;
  /** null: the server default applies. */
  tokensPerMinute: number | null;
  /** Spend budget in US dollars, exact decimal string; null: unlimited. */
  budgetUsd: string | null;
  manageKeys: boolean;
  manageDeployments: boolean;
}

export function toKeyGrants(row: KeyGrantColumns): KeyGrants {
  return {
    allowedModels: row.allowed_models,
    requestsPerMinute: row.rpm_limit,
    tokensPerMinute: row.tpm_limit,
    budgetUsd: row.budget_usd === null ? null : normalDecimal(row.budget_usd),
    manageKeys: row.manage_keys === true,
    manageDeployments: row.manage_deployments === true,
  };
}

/** "25.500" -> "25.5": numeric columns keep their scale; the API shows plain exact decimals. */
export function normalDecimal(value: string): string {
  return addMoney(value, "0");
}
