import type { ChatMessage } from "../../serving/types.js";
import type { Database } from "../../storage/database.js";
import { pruneStored, unexpired, type StoredObjectLimits } from "../../storage/stored-objects.js";

/** A stored response: the conversation it ends (its input and its output) and the object as returned. */
export interface StoredResponse {
  conversation: ChatMessage[];
  /** The response object's JSON text, exactly as it was sent (costs stay exact decimals). */
  body: string;
  /** What the response was generated from, oldest first, as `input_items` lists it (earlier responses' items included). */
  inputItems: Array<{ id: string; type: string } & Record<string, unknown>>;
  /** A background response's status (background-store.ts); absent or null: stored once finished, in the foreground. */
  status?: string | null;
}

/**
 * Responses kept with `store: true`, always scoped to the account that made them: every lookup
 * names the account, so another account's id reads as absent. Each account keeps its newest
 * `perAccount` responses for `retentionDays`; older ones read as absent and go at its next save.
 */
export interface ResponseStore {
  save(accountId: string, id: string, response: StoredResponse): Promise<void>;
  get(accountId: string, id: string): Promise<StoredResponse | null>;
  /** Whether there was such a response to delete. */
  delete(accountId: string, id: string): Promise<boolean>;
}

export function createResponseStore(db: Database, limits: StoredObjectLimits): ResponseStore {
  return {
    async save(accountId, id, { conversation, body, inputItems }) {
      await db.query("INSERT INTO responses (id, account_id, conversation, body, input_items) VALUES ($1, $2, $3::jsonb, $4, $5::jsonb)", [
        id,
        accountId,
        JSON.stringify(conversation),
        body,
        JSON.stringify(inputItems),
      ]);
      await pruneStored(db, "responses", accountId, limits);
    },
    async get(accountId, id) {
      const rows = await db.query<{ conversation: unknown; body: string; input_items: unknown; status: string | null }>(
        `SELECT conversation, body, input_items, status FROM responses WHERE id = $1 AND account_id = $2 AND ${unexpired(3)}`,
        [id, accountId, limits.retentionDays],
      );
      const row = rows[0];
      if (!row) return null;
      // Rows stored before input items were kept list none.
      return {
        conversation: fromJsonb(row.conversation) as ChatMessage[],
        body: row.body,
        inputItems: (fromJsonb(row.input_items) ?? []) as StoredResponse["inputItems"],
        status: row.status,
      };
    },
    async delete(accountId, id) {
      const rows = await db.query("DELETE FROM responses WHERE id = $1 AND account_id = $2 RETURNING id", [id, accountId]);
      return rows.length > 0;
    },
  };
}

/** A jsonb column as the driver hands it: parsed already (pg, PGlite) or as text. */
export function fromJsonb(value: unknown): unknown {
  return typeof value === "string" ? JSON.parse(value) : value;
}
