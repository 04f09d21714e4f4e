/**
 * The usage ledger: one row per request in `usage_records` (migration 2), and the query that
 * reports on it. Money stays exact end to end: costs go in as decimal strings cast to `numeric`, are
 * summed by PostgreSQL as `numeric`, and come back as text; token sums come back as text too and
 * are only turned into numbers after checking they are safe integers. The report's shape, and its
 * wire form both ways, are protocol/usage.ts; the query parameters are parsed by the usage route.
 */
import type { UsageLedger, UsageRecord } from "./ports.js";
import type { Database } from "../storage/database.js";
import { parseMoney, parseNonNegative, toText } from "./decimal.js";
import { chargingReservations } from "./budgets.js";
import { coalesced, valuesList } from "./coalesced.js";
import { journaledWrites, type LedgerJournal } from "./ledger-journal.js";
import { USAGE_GROUP_BY, USAGE_STATUSES, toSafeInteger, type UsageGroupBy, type UsageReport, type UsageTotals } from "../protocol/usage.js";

export interface UsageQuery {
  accountId: string;
  /** Inclusive: rows created at or after this instant. */
  start?: Date;
  /** Exclusive: rows created strictly before this instant. */
  end?: Date;
  /** Omit for totals only (no groups). */
  groupBy?: UsageGroupBy;
}

// ---------------------------------------------------------------------------------------------
// Recording

/**
 * The ledger on a database. `record` writes a request's final row exactly once, however often it
 * is called: it inserts the row, or completes the request's `in_flight` row (in-flight.ts), and
 * leaves a row that is already final (one a crash reconciliation closed, say) as it is. In the same
 * statement it charges the request's budget reservation with the row's cost (budgets.ts); rows of
 * requests ending together share that statement.
 */
export function createUsageLedger(db: Database, journal?: LedgerJournal): UsageLedger & { replay(): Promise<number> } {
  const write = coalesced((records: UsageRecord[]) => writeFinalRows(db, records));
  const { record, replay } = journaledWrites(write, journal, finalRowValues);
  return {
    record,
    settled: write.idle,
    replay,
    async markUndelivered(requestId: string, errorCode: string): Promise<void> {
      await write.idle(); // a journaled row may not be in the table yet
      await db.query("UPDATE usage_records SET status = 'failed', error_code = $2 WHERE request_id = $1 AND status = 'completed'", [
        requestId,
        errorCode,
      ]);
    },
  };
}

interface FinalRowColumn {
  type: "text" | "int" | "numeric" | "bool";
  /** The column's value for a record, checked. */
  value: (r: UsageRecord) => unknown;
  /** Written with the in-flight row at admission and kept when the final row replaces it. */
  fromAdmission?: true;
}

/** The final row, column by column: its SQL type and its value, so the two cannot fall out of step. */
const FINAL_ROW = {
  request_id: { type: "text", value: (r) => r.requestId, fromAdmission: true },
  account_id: { type: "text", value: (r) => r.accountId, fromAdmission: true },
  key_id: { type: "text", value: (r) => r.keyId, fromAdmission: true },
  model: { type: "text", value: (r) => r.model, fromAdmission: true },
  service_tier: { type: "text", value: (r) => r.serviceTier },
  prompt_tokens: { type: "int", value: (r) => count(r.promptTokens, "promptTokens") },
  cached_tokens: { type: "int", value: (r) => count(r.cachedTokens, "cachedTokens") },
  completion_tokens: { type: "int", value: (r) => count(r.completionTokens, "completionTokens") },
  // Exact text, never a float.
  cost_usd: { type: "numeric", value: (r) => toText(parseNonNegative(r.costUsd, "costUsd")) },
  status: { type: "text", value: (r) => r.status },
  finish_reason: { type: "text", value: (r) => r.finishReason },
  error_code: { type: "text", value: (r) => r.errorCode },
  queue_ms: { type: "int", value: (r) => optionalMs(r.queueMs, "queueMs") },
  ttft_ms: { type: "int", value: (r) => optionalMs(r.ttftMs, "ttftMs") },
  duration_ms: { type: "int", value: (r) => ms(r.durationMs, "durationMs") },
  api: { type: "text", value: (r) => r.api ?? "chat.completions" },
  batch_id: { type: "text", value: (r) => r.batchId ?? null, fromAdmission: true },
  accepted_prediction_tokens: { type: "int", value: (r) => count(r.acceptedPredictionTokens ?? 0, "acceptedPredictionTokens") },
  rejected_prediction_tokens: { type: "int", value: (r) => count(r.rejectedPredictionTokens ?? 0, "rejectedPredictionTokens") },
} satisfies Record<string, FinalRowColumn>;

const FINAL_COLUMNS: Array<[string, FinalRowColumn]> = Object.entries(FINAL_ROW);
const ROW_COLUMNS = FINAL_COLUMNS.map(([name]) => name).join(", ");
/** The columns a final row replaces on its in-flight row. */
const REPLACED = FINAL_COLUMNS.filter(([, column]) => !column.fromAdmission)
  .map(([name]) => `${name} = EXCLUDED.${name}`)
  .join(", ");
/** The row's types, then `unreserved`, which says how it is charged (no column of its own). */
const FINAL_ROW_TYPES = [...FINAL_COLUMNS.map(([, column]) => column.type), "bool"];

/**
 * Requests' final rows, in one statement (group commit: coalesced.ts), each request's budget
 * reservation charged with its cost in the same statement: the rows and the keys' spend change
 * together or not at all. An `unreserved` request (UsageRecord) is charged its cost when its row is
 * inserted here, and only then: a second record of it inserts nothing, so it charges nothing.
 */
async function writeFinalRows(db: Database, records: UsageRecord[]): Promise<undefined[]> {
  if (records.every((r) => r.unreserved === true)) return writeUnreservedRows(db, records);
  const values = valuesList(records.map(finalRowValues), FINAL_ROW_TYPES);
  await db.query(
    `WITH q (${ROW_COLUMNS}, unreserved) AS (VALUES ${values.sql}),
     written AS (
       INSERT INTO usage_records (${ROW_COLUMNS})
       SELECT ${ROW_COLUMNS} FROM q
       ON CONFLICT (request_id) DO UPDATE SET ${REPLACED}
       WHERE usage_records.status = 'in_flight'
       RETURNING request_id),
     ${chargingReservations("q", "SELECT q.key_id, q.cost_usd FROM q JOIN written w ON w.request_id = q.request_id WHERE q.unreserved")}
     SELECT 1`,
    values.params,
  );
  return records.map(() => undefined);
}

/**
 * Rows that are all `unreserved` (an embedding's, answered once its row is written): no reservation
 * to find, so the statement only inserts the rows and charges their keys' spend with the rows it
 * inserted. Half the database time of the statement above (PGlite, one row: 0.35 against 0.55-0.64
 * ms a round trip), which the answer waits for. Expired reservations are left to the next reserved
 * row's statement to sweep.
 */
async function writeUnreservedRows(db: Database, records: UsageRecord[]): Promise<undefined[]> {
  const values = valuesList(
    records.map((r) => FINAL_COLUMNS.map(([, column]) => column.value(r))),
    FINAL_COLUMNS.map(([, column]) => column.type),
  );
  await db.query(
    `WITH q (${ROW_COLUMNS}) AS (VALUES ${values.sql}),
     written AS (
       INSERT INTO usage_records (${ROW_COLUMNS})
       SELECT ${ROW_COLUMNS} FROM q
       ON CONFLICT (request_id) DO UPDATE SET ${REPLACED}
       WHERE usage_records.status = 'in_flight'
       RETURNING key_id, cost_usd)
     UPDATE api_keys SET spent_usd = spent_usd + c.amount
       FROM (SELECT key_id, sum(cost_usd) AS amount FROM written GROUP BY key_id) c
      WHERE api_keys.id = c.key_id`,
    values.params,
  );
  return records.map(() => undefined);
}

/** One row's values in FINAL_ROW_TYPES' order, checked. */
function finalRowValues(r: UsageRecord): unknown[] {
  return [...FINAL_COLUMNS.map(([, column]) => column.value(r)), r.unreserved === true];
}

const INT4_MAX = 2_147_483_647;

function count(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > INT4_MAX) {
    throw new RangeError(`${what} must be a non-negative integer up to ${INT4_MAX}, got ${String(value)}`);
  }
  return value;
}

/** Durations are whole milliseconds in the table; a fractional timer reading is rounded. */
function ms(value: number, what: string): number {
  if (!Number.isFinite(value) || value < 0)
    throw new RangeError(`${what} must be a non-negative number of milliseconds, got ${String(value)}`);
  return Math.min(Math.round(value), INT4_MAX);
}

function optionalMs(value: number | null, what: string): number | null {
  return value === null ? null : ms(value, what);
}

// ---------------------------------------------------------------------------------------------
// Querying

/**
 * The group, by model, of the requests refused because their model does not exist (or is not the
 * caller's): each keeps the name it sent on its row, but one group stands for them all, or every
 * made-up name a tenant sends would be a group of its own. No model id has parentheses.
 */
export const UNKNOWN_MODEL_GROUP = "(unknown model)";

/** SQL for each grouping; constants only, never caller input. Days are UTC calendar days. */
const GROUP_EXPRESSIONS: Record<UsageGroupBy, string> = {
  model: `CASE WHEN error_code = 'model_not_found' THEN '${UNKNOWN_MODEL_GROUP}' ELSE model END`,
  key: "key_id",
  day: "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
};

interface AggregateRow {
  grp: string | null;
  status: string | null;
  no_group: number | string;
  no_status: number | string;
  requests: string;
  prompt_tokens: string;
  cached_tokens: string;
  completion_tokens: string;
  accepted_prediction_tokens: string;
  rejected_prediction_tokens: string;
  total_tokens: string;
  cost_usd: string;
}

/**
 * Totals (and groups, when asked for) of one account's usage in [start, end). Only that account's
 * rows are ever read. One statement (GROUPING SETS), so totals, groups and per-status counts all
 * come from the same snapshot and always add up.
 */
export async function queryUsage(db: Database, query: UsageQuery): Promise<UsageReport> {
  if (typeof query.accountId !== "string" || query.accountId === "") throw new TypeError("queryUsage needs an accountId.");
  const groupBy = query.groupBy;
  if (groupBy !== undefined && !USAGE_GROUP_BY.includes(groupBy)) throw new TypeError(`Unknown groupBy '${String(groupBy)}'.`);
  const groupExpression = groupBy === undefined ? "NULL::text" : GROUP_EXPRESSIONS[groupBy];

  const rows = await db.query<AggregateRow>(
    `SELECT grp, status, GROUPING(grp) AS no_group, GROUPING(status) AS no_status,
            count(*)::text                                          AS requests,
            coalesce(sum(prompt_tokens), 0)::text                   AS prompt_tokens,
            coalesce(sum(cached_tokens), 0)::text                   AS cached_tokens,
            coalesce(sum(completion_tokens), 0)::text               AS completion_tokens,
            coalesce(sum(accepted_prediction_tokens), 0)::text      AS accepted_prediction_tokens,
            coalesce(sum(rejected_prediction_tokens), 0)::text      AS rejected_prediction_tokens,
            coalesce(sum(prompt_tokens::bigint + completion_tokens), 0)::text AS total_tokens,
            coalesce(sum(cost_usd), 0)::text                        AS cost_usd
       FROM (SELECT ${groupExpression} AS grp, status,
                    -- A request refused before it ran consumed no tokens, whatever its prompt would have been.
                    CASE WHEN status IN ('rejected', 'expired') THEN 0 ELSE prompt_tokens END AS prompt_tokens,
                    CASE WHEN status IN ('rejected', 'expired') THEN 0 ELSE cached_tokens END AS cached_tokens,
                    completion_tokens, accepted_prediction_tokens, rejected_prediction_tokens, cost_usd
               FROM usage_records
              WHERE account_id = $1
                AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
                AND ($3::timestamptz IS NULL OR created_at <  $3::timestamptz)) AS r
      GROUP BY GROUPING SETS ((), (status), (grp), (grp, status))`,
    [query.accountId, query.start ? isoTime(query.start, "start") : null, query.end ? isoTime(query.end, "end") : null],
  );

  let totals = emptyTotals();
  const groups = new Map<string, UsageTotals>();
  const groupOf = (name: string): UsageTotals => {
    let group = groups.get(name);
    if (!group) groups.set(name, (group = emptyTotals()));
    return group;
  };

  for (const row of rows) {
    const wholeGroup = Number(row.no_group) === 1; // grp rolled up: an account-wide row
    const wholeStatus = Number(row.no_status) === 1;
    const target = wholeGroup ? null : groupBy === undefined ? undefined : (row.grp ?? "");
    if (target === undefined) continue; // grouped by the NULL placeholder: nothing asked for
    if (wholeStatus) {
      const sums = toTotals(row);
      if (target === null) totals = { ...sums, by_status: totals.by_status };
      else groups.set(target, { ...sums, by_status: groupOf(target).by_status });
    } else {
      const by = target === null ? totals.by_status : groupOf(target).by_status;
      by[row.status ?? ""] = toSafeInteger(row.requests, "requests");
    }
  }

  const sorted = [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([group, values]) => ({ group, ...values }));
  return { totals, groups: sorted };
}

function emptyTotals(): UsageTotals {
  const by_status: Record<string, number> = {};
  for (const status of USAGE_STATUSES) by_status[status] = 0;
  return {
    requests: 0,
    prompt_tokens: 0,
    cached_tokens: 0,
    completion_tokens: 0,
    accepted_prediction_tokens: 0,
    rejected_prediction_tokens: 0,
    total_tokens: 0,
    cost_usd: "0",
    by_status,
  };
}

function toTotals(row: AggregateRow): UsageTotals {
  return {
    requests: toSafeInteger(row.requests, "requests"),
    prompt_tokens: toSafeInteger(row.prompt_tokens, "prompt_tokens"),
    cached_tokens: toSafeInteger(row.cached_tokens, "cached_tokens"),
    completion_tokens: toSafeInteger(row.completion_tokens, "completion_tokens"),
    accepted_prediction_tokens: toSafeInteger(row.accepted_prediction_tokens, "accepted_prediction_tokens"),
    rejected_prediction_tokens: toSafeInteger(row.rejected_prediction_tokens, "rejected_prediction_tokens"),
    total_tokens: toSafeInteger(row.total_tokens, "total_tokens"),
    cost_usd: toText(parseMoney(String(row.cost_usd), "cost_usd")),
    by_status: {},
  };
}

function isoTime(date: Date, what: string): string {
  if (!(date instanceof Date) || Number.isNaN(date.getTime())) throw new TypeError(`${what} is not a valid date.`);
  return date.toISOString();
}
