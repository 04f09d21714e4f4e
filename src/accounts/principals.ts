/**
 * Who a key is: the principal behind a bearer token (or behind a key id, for work the key started
 * earlier), as the request path needs it. Creating and changing accounts and keys is key-store.ts.
 */
import type { Database } from "../storage/database.js";
import { hashApiKey, hashesEqual, looksLikeApiKey } from "./api-key.js";
import type { CachedKey } from "./key-cache.js";
import type { Principal } from "../protocol/principal.js";

export type { Principal };
import { toKeyGrants, type KeyGrantColumns } from "./key-row.js";

/** Keys that would authenticate right now: not revoked, not expired, account enabled. */
export async function countActiveKeys(db: Database): Promise<number> {
  const rows = await db.query<{ count: string }>(
    `SELECT count(*) AS count
       FROM api_keys k JOIN accounts a ON a.id = k.account_id
      WHERE k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) AND NOT a.disabled`,
  );
  return Number(rows[0]?.count ?? 0);
}

/**
 * The principal behind a bearer token, or null when the key is unknown, revoked, expired, or its
 * account is disabled. Callers turn null into one uniform 401, so nobody can probe which it was.
 */
export async function authenticate(db: Database, bearerToken: string): Promise<Principal | null> {
  return (await lookUpKey(db, bearerToken))?.principal ?? null;
}

/** authenticate(), with when the key expires: what key-cache.ts needs to remember it. */
export async function lookUpKey(db: Database, bearerToken: string): Promise<CachedKey<Principal> | null> {
  if (!looksLikeApiKey(bearerToken)) return null;
  const presentedHash = hashApiKey(bearerToken);
  const rows = await db.query<PrincipalRow>(`${PRINCIPAL_SELECT} WHERE k.secret_hash = $1`, [presentedHash]);
  const row = rows[0];
  // The index lookup found the row; the constant-time comparison is what actually accepts it.
  if (!row || !hashesEqual(row.secret_hash, presentedHash) || !row.usable) return null;

  if (row.touch_due) {
    // last_used_at is coarse on purpose: one write per key per minute, not one per request.
    await db.query(
      "UPDATE api_keys SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
      [row.key_id],
    );
  }
  return { principal: toPrincipal(row), expiresAt: row.expires_at === null ? null : new Date(row.expires_at).getTime() };
}

/**
 * The principal of a key by its id, for work the key started earlier (a batch's lines): null once
 * the key is revoked or expired or its account disabled, exactly when authenticate() would refuse it.
 */
export async function principalOfKey(db: Database, keyId: string): Promise<Principal | null> {
  const rows = await db.query<PrincipalRow>(`${PRINCIPAL_SELECT} WHERE k.id = $1`, [keyId]);
  const row = rows[0];
  return row?.usable ? toPrincipal(row) : null;
}

interface PrincipalRow extends KeyGrantColumns {
  key_id: string;
  secret_hash: string;
  account_id: string;
  account_name: string;
  usable: boolean;
  touch_due: boolean;
  expires_at: Date | string | null;
}

const PRINCIPAL_SELECT = `SELECT k.id AS key_id, k.secret_hash, a.id AS account_id, a.name AS account_name, k.allowed_models,
            k.rpm_limit, k.tpm_limit, k.budget_usd, k.manage_keys, k.manage_deployments, k.expires_at,
            (k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) AND NOT a.disabled) AS usable,
            (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute') AS touch_due
       FROM api_keys k JOIN accounts a ON a.id = k.account_id`;

function toPrincipal(row: PrincipalRow): Principal {
  const { allowedModels, requestsPerMinute, tokensPerMinute, budgetUsd, manageKeys, manageDeployments } = toKeyGrants(row);
  return {
    accountId: row.account_id,
    accountName: row.account_name,
    keyId: row.key_id,
    allowedModels,
    limits: { requestsPerMinute, tokensPerMinute, budgetUsd },
    manageKeys,
    manageDeployments,
  };
}
