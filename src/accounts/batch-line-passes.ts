import { randomBytes } from "node:crypto";
import { hashApiKey } from "./api-key.js";
import type { Database } from "../storage/database.js";

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
