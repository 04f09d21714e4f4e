import type { ChatMessage } from "../serving/types.js";
import type { Database } from "../storage/database.js";

/** A stored response: the conversation it ends (its input and its output) and the object as returned. */
export interface StoredResponse {
  conversation: ChatMessage[];
  /** The response object's JSON text, exactly as it was sent (costs stay exact decimals). */
  body: string;
}

/**
 * Responses kept with `store: true`, always scoped to the account that made them: every lookup
 * names the account, so another account's id reads as absent.
 */
export interface ResponseStore {
  save(accountId: string, id: string, response: StoredResponse): Promise<void>;
  get(accountId: string, id: string): Promise<StoredResponse | null>;
  /** Whether there was such a response to delete. */
  delete(accountId: string, id: string): Promise<boolean>;
}

export function createResponseStore(db: Database): ResponseStore {
  return {
    async save(accountId, id, { conversation, body }) {
      await db.query("INSERT INTO responses (id, account_id, conversation, body) VALUES ($1, $2, $3::jsonb, $4)", [id, accountId, JSON.stringify(conversation), body]);
    },
    async get(accountId, id) {
      const rows = await db.query<{ conversation: ChatMessage[] | string; body: string }>("SELECT conversation, body FROM responses WHERE id = $1 AND account_id = $2", [id, accountId]);
      const row = rows[0];
      if (!row) return null;
      const conversation = typeof row.conversation === "string" ? (JSON.parse(row.conversation) as ChatMessage[]) : row.conversation;
      return { conversation, body: row.body };
    },
    async delete(accountId, id) {
      const rows = await db.query("DELETE FROM responses WHERE id = $1 AND account_id = $2 RETURNING id", [id, accountId]);
      return rows.length > 0;
    },
  };
}
