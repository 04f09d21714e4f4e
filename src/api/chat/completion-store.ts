import type { Database } from "../../storage/database.js";
import { pruneStored, unexpired, type StoredObjectLimits } from "../../storage/stored-objects.js";

/** A chat completion kept with `store: true`: the request's messages and the completion as it was sent. */
export interface StoredCompletion {
  id: string;
  model: string;
  metadata: Record<string, string>;
  /** The messages of the request, as the caller sent them. */
  messages: Array<Record<string, unknown>>;
  /** The completion object's JSON text, exactly as it was sent (costs stay exact decimals), without metadata. */
  body: string;
}

export interface CompletionListQuery {
  model?: string;
  /** Every pair must match. */
  metadata: Record<string, string>;
  after?: string;
  limit: number;
  order: "asc" | "desc";
}

/**
 * Chat completions kept with `store: true`, always scoped to the account that made them: every
 * statement names the account, so another account's id reads as absent. Lists page by creation
 * order (then id), with `after` naming the last id of the previous page. Each account keeps its newest
 * `perAccount` completions for `retentionDays`; older ones read as absent and go at its next save.
 */
export interface CompletionStore {
  save(accountId: string, completion: StoredCompletion): Promise<void>;
  get(accountId: string, id: string): Promise<StoredCompletion | null>;
  /** `limit + 1` rows at most, so the caller can tell whether there are more; null when `after` names no completion. */
  list(accountId: string, query: CompletionListQuery): Promise<StoredCompletion[] | null>;
  /** The completion with its metadata replaced, or null when there is no such completion. */
  setMetadata(accountId: string, id: string, metadata: Record<string, string>): Promise<StoredCompletion | null>;
  /** Whether there was such a completion to delete. */
  delete(accountId: string, id: string): Promise<boolean>;
}

interface Row {
  id: string;
  model: string;
  metadata: unknown;
  messages: unknown;
  body: string;
}

const COLUMNS = "id, model, metadata, messages, body";
const parsed = (value: unknown): unknown => (typeof value === "string" ? JSON.parse(value) : value);
const fromRow = (row: Row): StoredCompletion => ({
  id: row.id,
  model: row.model,
  metadata: parsed(row.metadata) as Record<string, string>,
  messages: parsed(row.messages) as StoredCompletion["messages"],
  body: row.body,
});

export function createCompletionStore(db: Database, limits: StoredObjectLimits): CompletionStore {
  return {
    async save(accountId, c) {
      await db.query(
        `INSERT INTO chat_completions (id, account_id, model, metadata, messages, body) VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6)`,
        [c.id, accountId, c.model, JSON.stringify(c.metadata), JSON.stringify(c.messages), c.body],
      );
      await pruneStored(db, "chat_completions", accountId, limits);
    },
    async get(accountId, id) {
      const rows = await db.query<Row>(`SELECT ${COLUMNS} FROM chat_completions WHERE id = $1 AND account_id = $2 AND ${unexpired(3)}`, [
        id,
        accountId,
        limits.retentionDays,
      ]);
      return rows[0] ? fromRow(rows[0]) : null;
    },
    async list(accountId, query) {
      const params: unknown[] = [accountId, JSON.stringify(query.metadata), query.limit + 1, limits.retentionDays];
      let where = `account_id = $1 AND metadata @> $2::jsonb AND ${unexpired(4)}`;
      if (query.model !== undefined) {
        params.push(query.model);
        where += ` AND model = $${params.length}`;
      }
      const direction = query.order === "asc" ? ">" : "<";
      if (query.after !== undefined) {
        const cursor = await db.query<{ seq: string }>("SELECT seq FROM chat_completions WHERE id = $1 AND account_id = $2", [
          query.after,
          accountId,
        ]);
        if (!cursor[0]) return null;
        params.push(cursor[0].seq);
        where += ` AND seq ${direction} $${params.length}`;
      }
      const rows = await db.query<Row>(
        `SELECT ${COLUMNS} FROM chat_completions WHERE ${where} ORDER BY seq ${query.order === "asc" ? "ASC" : "DESC"} LIMIT $3`,
        params,
      );
      return rows.map(fromRow);
    },
    async setMetadata(accountId, id, metadata) {
      const rows = await db.query<Row>(
        `UPDATE chat_completions SET metadata = $3::jsonb WHERE id = $1 AND account_id = $2 AND ${unexpired(4)} RETURNING ${COLUMNS}`,
        [id, accountId, JSON.stringify(metadata), limits.retentionDays],
      );
      return rows[0] ? fromRow(rows[0]) : null;
    },
    async delete(accountId, id) {
      const rows = await db.query("DELETE FROM chat_completions WHERE id = $1 AND account_id = $2 RETURNING id", [id, accountId]);
      return rows.length > 0;
    },
  };
}
