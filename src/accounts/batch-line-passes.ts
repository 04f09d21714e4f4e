import { randomBytes } from "node:crypto";
import { hashApiKey } from "./api-key.js";
import type { Database } from "../storage/database.js";
import type { Principal } from "../protocol/principal.js";

/**
 * Who a batch line runs as. The batch runner runs a line in this process as its batch's key, looked
 * up as the key stands now (lineCaller); only a line forwarded to another server process, the one
 * running its deployment, carries a one-time pass from the database, which that process's
 * authentication redeems (redeemingLinePasses).
 */

/** Every token that names a batch line starts so; none is an API key (those start `sk-sy-`). */
export const LINE_TOKEN_PREFIX = "sy-batch-";

/** A line's token is used within the request that carries it; one not used by then is void. */
const PASS_SECONDS = 60;

/** Who a batch line runs as: the batch's key and account, and the batch (its tier, price and ledger rows). */
export interface LineIdentity {
  keyId: string;
  accountId: string;
  batchId: string;
}

export function newLineToken(): string {
  return LINE_TOKEN_PREFIX + randomBytes(24).toString("base64url");
}

/**
 * One-time passes in the database, for a batch line that a gateway forwards to the server process
 * running its deployment: that process has no other way to know the line's key and batch. Only
 * the token's hash is stored; a pass is spent by its first use and void after a minute.
 */
export function createLinePasses(db: Database) {
  return {
    async issue(identity: LineIdentity): Promise<string> {
      const token = newLineToken();
      await db.query("DELETE FROM batch_line_passes WHERE expires_at < now()");
      await db.query(
        `INSERT INTO batch_line_passes (token_hash, key_id, account_id, batch_id, expires_at) VALUES ($1, $2, $3, $4, now() + interval '${PASS_SECONDS} seconds')`,
        [hashApiKey(token), identity.keyId, identity.accountId, identity.batchId],
      );
      return token;
    },

    /** The pass's identity, once: the pass is deleted as it is read. */
    async redeem(token: string): Promise<LineIdentity | null> {
      const rows = await db.query<{ key_id: string; account_id: string; batch_id: string }>(
        "DELETE FROM batch_line_passes WHERE token_hash = $1 AND expires_at > now() RETURNING key_id, account_id, batch_id",
        [hashApiKey(token)],
      );
      const row = rows[0];
      return row ? { keyId: row.key_id, accountId: row.account_id, batchId: row.batch_id } : null;
    },
  };
}

export type LinePasses = ReturnType<typeof createLinePasses>;

/** A pass is this long; anything else with the prefix costs no query. */
const LINE_TOKEN_LENGTH = newLineToken().length;

/** The principal of a key by its id, as it stands now: null once it is revoked or expired, or its account disabled. */
export type PrincipalOf = (keyId: string) => Promise<Omit<Principal, "batchId"> | null>;

/** The batch's key with the batch on it (batch tier, batch price, batch id on its ledger row); null: the key is no longer valid. */
export function lineCaller(principalOf: PrincipalOf) {
  return async (identity: LineIdentity): Promise<Principal | null> => {
    const principal = await principalOf(identity.keyId);
    return principal && principal.accountId === identity.accountId ? { ...principal, batchId: identity.batchId } : null;
  };
}

/** The key lookup, with the passes of lines forwarded from other processes recognized first. */
export function redeemingLinePasses(
  passes: LinePasses,
  callerOf: (identity: LineIdentity) => Promise<Principal | null>,
  next: (token: string) => Promise<Principal | null>,
): (token: string) => Promise<Principal | null> {
  return async (token) => {
    if (!token.startsWith(LINE_TOKEN_PREFIX)) return next(token);
    if (token.length !== LINE_TOKEN_LENGTH) return null;
    const identity = await passes.redeem(token);
    return identity ? callerOf(identity) : null;
  };
}
