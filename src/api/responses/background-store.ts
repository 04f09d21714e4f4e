import type { Database } from "../../storage/database.js";
import { ExactDecimal, stringifyJson } from "../../protocol/money-json.js";
import type { StoredResponse } from "./response-store.js";

/** One stored stream event of a background response: its sequence number and its JSON text. */
export interface StoredEvent {
  seq: number;
  data: string;
}

/** What a background response's row says as it moves on. */
export interface BackgroundState {
  status: string;
  body: string;
  /** Set when it ends: the conversation with the answer (for `previous_response_id`). */
  conversation?: StoredResponse["conversation"];
  /** The event that says it ended, kept in the same transaction, so a replay ends where the status does. */
  lastEvent?: StoredEvent;
}

/** The statuses a background response runs through; every other one is final. */
const UNFINISHED = "('queued', 'in_progress')";

export const ORPHANED_MESSAGE =
  "The server stopped while this background response was running, so it was not finished. What it generated until then is billed once; create it again to get an answer.";

/**
 * Background responses' rows (responses.status and owner_id, migration 19) and their stream events
 * (response_events). Every statement a caller reaches names the account; the runner's own writes
 * name the response it created.
 */
export interface BackgroundStore {
  /** Unfinished (queued or in progress) background responses of the account. */
  countUnfinished(accountId: string): Promise<number>;
  /** Stores the response as it is created (queued), owned by this process. */
  create(accountId: string, id: string, ownerId: string, response: StoredResponse & { status: string }): Promise<void>;
  /** Moves an unfinished response on; false when it is no longer unfinished (cancelled, deleted). */
  update(id: string, state: BackgroundState): Promise<boolean>;
  /** Keeps events of an unfinished response; false when it is no longer unfinished, and nothing was kept. */
  appendEvents(id: string, events: StoredEvent[]): Promise<boolean>;
  /** The events after sequence number `after`, oldest first. */
  eventsAfter(accountId: string, id: string, after: number): Promise<StoredEvent[]>;
  /** Cancels an unfinished response that no live run here holds (its process is gone or another). */
  cancelStored(accountId: string, id: string): Promise<void>;
  /** Fails every unfinished response whose server process is gone, with a last `response.failed` event; how many. */
  failOrphaned(): Promise<number>;
}

export function createBackgroundStore(db: Database): BackgroundStore {
  return {
    async countUnfinished(accountId) {
      const rows = await db.query<{ n: string | number }>(
        `SELECT count(*) AS n FROM responses WHERE account_id = $1 AND status IN ${UNFINISHED}`,
        [accountId],
      );
      return Number(rows[0]?.n ?? 0);
    },
    async create(accountId, id, ownerId, { conversation, body, inputItems, status }) {
      await db.query(
        "INSERT INTO responses (id, account_id, conversation, body, input_items, status, owner_id) VALUES ($1, $2, $3::jsonb, $4, $5::jsonb, $6, $7)",
        [id, accountId, JSON.stringify(conversation), body, JSON.stringify(inputItems), status, ownerId],
      );
    },
    async update(id, { status, body, conversation, lastEvent }) {
      return db.transaction(async (tx) => {
        const rows = await tx.query(
          `UPDATE responses SET status = $2, body = $3, conversation = COALESCE($4::jsonb, conversation)
            WHERE id = $1 AND status IN ${UNFINISHED} RETURNING id`,
          [id, status, body, conversation ? JSON.stringify(conversation) : null],
        );
        if (rows.length > 0 && lastEvent)
          await tx.query("INSERT INTO response_events (response_id, seq, data) VALUES ($1, $2, $3)", [id, lastEvent.seq, lastEvent.data]);
        return rows.length > 0;
      });
    },
    async appendEvents(id, events) {
      if (events.length === 0) return true;
      const rows = await db.query(
        `INSERT INTO response_events (response_id, seq, data)
         SELECT $1, e.seq, e.data FROM unnest($2::int[], $3::text[]) AS e (seq, data)
          WHERE EXISTS (SELECT 1 FROM responses WHERE id = $1 AND status IN ${UNFINISHED})
         RETURNING seq`,
        [id, events.map((e) => e.seq), events.map((e) => e.data)],
      );
      return rows.length > 0;
    },
    async eventsAfter(accountId, id, after) {
      return db.query<StoredEvent>(
        `SELECT e.seq, e.data FROM response_events e JOIN responses r ON r.id = e.response_id
          WHERE e.response_id = $1 AND r.account_id = $2 AND e.seq > $3 ORDER BY e.seq`,
        [id, accountId, after],
      );
    },
    async cancelStored(accountId, id) {
      await finishStored(db, "account_id = $2 AND id = $1", [id, accountId], { status: "cancelled" });
    },
    async failOrphaned() {
      return finishStored(db, "(owner_id IS NULL OR NOT EXISTS (SELECT 1 FROM server_owners o WHERE o.id = responses.owner_id))", [], {
        status: "failed",
        error: { code: "server_error", message: ORPHANED_MESSAGE },
      });
    },
  };
}

/**
 * Ends unfinished responses no live run will end: the stored body says the new status (it was
 * stored before any usage, so plain JSON holds it exactly), and a failure gets its event.
 */
async function finishStored(
  db: Database,
  where: string,
  params: unknown[],
  end: { status: "cancelled" | "failed"; error?: { code: string; message: string } },
): Promise<number> {
  const rows = await db.query<{ id: string; body: string; last: number | null }>(
    `SELECT id, body, (SELECT max(seq) FROM response_events e WHERE e.response_id = responses.id) AS last
       FROM responses WHERE status IN ${UNFINISHED} AND ${where}`,
    params,
  );
  let ended = 0;
  for (const row of rows) {
    const response = { ...(JSON.parse(row.body) as object), status: end.status, error: end.error ?? null };
    const body = stringifyJson(response);
    await db.transaction(async (tx) => {
      const updated = await tx.query(`UPDATE responses SET status = $2, body = $3 WHERE id = $1 AND status IN ${UNFINISHED} RETURNING id`, [
        row.id,
        end.status,
        body,
      ]);
      if (updated.length === 0 || end.status !== "failed") return;
      const seq = (row.last ?? -1) + 1;
      const event = { type: "response.failed", sequence_number: seq, response };
      await tx.query("INSERT INTO response_events (response_id, seq, data) VALUES ($1, $2, $3)", [row.id, seq, stringifyJson(event)]);
      ended++;
    });
    if (end.status === "cancelled") ended++;
  }
  return ended;
}

/**
 * A stored event as the object it was sent as. Its only exact decimal, the usage's
 * `estimated_cost`, becomes an ExactDecimal again, so a replay writes the very digits sent live.
 */
export function parseStoredEvent(data: string): Record<string, unknown> {
  const marked = data.replace(/"estimated_cost":(-?\d+(?:\.\d+)?)/, '"estimated_cost":"$1"');
  const event = JSON.parse(marked) as { response?: { usage?: { estimated_cost?: unknown } } };
  const usage = event.response?.usage;
  if (usage && typeof usage.estimated_cost === "string") usage.estimated_cost = new ExactDecimal(usage.estimated_cost);
  return event as Record<string, unknown>;
}
