/**
 * The usage ledger: one row per request in `usage_records` (migration 2), and the queries that
 * report on it. Money stays exact end to end: costs go in as decimal strings cast to `numeric`, are
 * summed by PostgreSQL as `numeric`, and come back as text; token sums come back as text too and
 * are only turned into numbers after checking they are safe integers.
 *
 * Also here, so the user route, the admin route and the CLI agree by construction: parsing of the
 * query parameters (start, end, group_by) and the JSON wire shape of a usage report, both ways.
 */
import { InvalidRequest } from "../errors.js";
import type { UsageLedger, UsageRecord, UsageStatus } from "../serving/ports.js";
import type { Database } from "../storage/database.js";
import { parseMoney, parseNonNegative, toText } from "./decimal.js";
import { ExactDecimal } from "./money-json.js";
import type { InstanceUsage } from "./instance-usage.js";

export type UsageGroupBy = "model" | "day" | "key";
export const USAGE_GROUP_BY: readonly UsageGroupBy[] = ["model", "day", "key"];

/** Every status a ledger row can have; `by_status` always lists all of them (zero when absent). */
export const USAGE_STATUSES: readonly UsageStatus[] = ["completed", "cancelled", "failed", "rejected", "expired", "in_flight", "interrupted"];

export interface UsageQuery {
  accountId: string;
  /** Inclusive: rows created at or after this instant. */
  start?: Date;
  /** Exclusive: rows created strictly before this instant. */
  end?: Date;
  /** Omit for totals only (no groups). */
  groupBy?: UsageGroupBy;
}

export interface UsageTotals {
  /** Every recorded request, whatever its status. */
  requests: number;
  /** All prompt tokens, cached ones included. */
  prompt_tokens: number;
  /** The part of prompt_tokens served from the prompt cache. */
  cached_tokens: number;
  completion_tokens: number;
  /** prompt_tokens + completion_tokens. */
  total_tokens: number;
  /** Exact decimal string, US dollars, no exponent, trailing zeros trimmed ("0.300000001", "0"). */
  cost_usd: string;
  /** Requests per status; every status in USAGE_STATUSES is present. */
  by_status: Record<string, number>;
}

export interface UsageGroup extends UsageTotals {
  /** The model id, the UTC day (`YYYY-MM-DD`) or the key id, depending on groupBy. */
  group: string;
}

export interface UsageReport {
  totals: UsageTotals;
  /** Empty when no groupBy was asked for; otherwise sorted by group (byte order; days ascend). */
  groups: UsageGroup[];
  /** Dedicated instance time, billed apart from tokens (instance-usage.ts); absent where not asked for. */
  deployments?: InstanceUsage;
}

// ---------------------------------------------------------------------------------------------
// Recording

/**
 * The ledger on a database. `record` writes a request's final row exactly once, however often it
 * is called: it inserts the row, or completes the request's `in_flight` row (in-flight.ts), and
 * leaves a row that is already final (one a crash reconciliation closed, say) as it is.
 */
export function createUsageLedger(db: Database): UsageLedger {
  return {
    async record(record: UsageRecord): Promise<void> {
      const cost = toText(parseNonNegative(record.costUsd, "costUsd")); // exact text; never a float
      await db.query(
        `INSERT INTO usage_records (request_id, account_id, key_id, model, service_tier, prompt_tokens, cached_tokens,
                                    completion_tokens, cost_usd, status, finish_reason, error_code, queue_ms, ttft_ms, duration_ms, api, batch_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::numeric, $10, $11, $12, $13, $14, $15, $16, $17)
         ON CONFLICT (request_id) DO UPDATE
           SET service_tier = EXCLUDED.service_tier, prompt_tokens = EXCLUDED.prompt_tokens, cached_tokens = EXCLUDED.cached_tokens,
               completion_tokens = EXCLUDED.completion_tokens, cost_usd = EXCLUDED.cost_usd, status = EXCLUDED.status,
               finish_reason = EXCLUDED.finish_reason, error_code = EXCLUDED.error_code, queue_ms = EXCLUDED.queue_ms,
               ttft_ms = EXCLUDED.ttft_ms, duration_ms = EXCLUDED.duration_ms, api = EXCLUDED.api
         WHERE usage_records.status = 'in_flight'`,
        [
          record.requestId,
          record.accountId,
          record.keyId,
          record.model,
          record.serviceTier,
          count(record.promptTokens, "promptTokens"),
          count(record.cachedTokens, "cachedTokens"),
          count(record.completionTokens, "completionTokens"),
          cost,
          record.status,
          record.finishReason,
          record.errorCode,
          optionalMs(record.queueMs, "queueMs"),
          optionalMs(record.ttftMs, "ttftMs"),
          ms(record.durationMs, "durationMs"),
          record.api ?? "chat.completions",
          record.batchId ?? null,
        ],
      );
    },
    async markUndelivered(requestId: string, errorCode: string): Promise<void> {
      await db.query("UPDATE usage_records SET status = 'failed', error_code = $2 WHERE request_id = $1 AND status = 'completed'", [requestId, errorCode]);
    },
  };
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
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`${what} must be a non-negative number of milliseconds, got ${String(value)}`);
  return Math.min(Math.round(value), INT4_MAX);
}

function optionalMs(value: number | null, what: string): number | null {
  return value === null ? null : ms(value, what);
}

// ---------------------------------------------------------------------------------------------
// Querying

/** SQL for each grouping; constants only, never caller input. Days are UTC calendar days. */
const GROUP_EXPRESSIONS: Record<UsageGroupBy, string> = {
  model: "model",
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
            coalesce(sum(prompt_tokens::bigint + completion_tokens), 0)::text AS total_tokens,
            coalesce(sum(cost_usd), 0)::text                        AS cost_usd
       FROM (SELECT ${groupExpression} AS grp, status,
                    -- A request refused before it ran consumed no tokens, whatever its prompt would have been.
                    CASE WHEN status IN ('rejected', 'expired') THEN 0 ELSE prompt_tokens END AS prompt_tokens,
                    CASE WHEN status IN ('rejected', 'expired') THEN 0 ELSE cached_tokens END AS cached_tokens,
                    completion_tokens, cost_usd
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
    const target = wholeGroup ? null : groupBy === undefined ? undefined : row.grp ?? "";
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

  const sorted = [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([group, values]) => ({ group, ...values }));
  return { totals, groups: sorted };
}

function emptyTotals(): UsageTotals {
  const by_status: Record<string, number> = {};
  for (const status of USAGE_STATUSES) by_status[status] = 0;
  return { requests: 0, prompt_tokens: 0, cached_tokens: 0, completion_tokens: 0, total_tokens: 0, cost_usd: "0", by_status };
}

function toTotals(row: AggregateRow): UsageTotals {
  return {
    requests: toSafeInteger(row.requests, "requests"),
    prompt_tokens: toSafeInteger(row.prompt_tokens, "prompt_tokens"),
    cached_tokens: toSafeInteger(row.cached_tokens, "cached_tokens"),
    completion_tokens: toSafeInteger(row.completion_tokens, "completion_tokens"),
    total_tokens: toSafeInteger(row.total_tokens, "total_tokens"),
    cost_usd: toText(parseMoney(String(row.cost_usd), "cost_usd")),
    by_status: {},
  };
}

/** An integer sum that arrived as text; refuses anything a JS number would not hold exactly. */
function toSafeInteger(text: unknown, what: string): number {
  const value = typeof text === "string" && /^-?\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value)) throw new RangeError(`${what} is not a safe integer: ${String(text)}`);
  return value;
}

function isoTime(date: Date, what: string): string {
  if (!(date instanceof Date) || Number.isNaN(date.getTime())) throw new TypeError(`${what} is not a valid date.`);
  return date.toISOString();
}

// ---------------------------------------------------------------------------------------------
// Parameters: start / end / group_by

export interface UsageParams {
  start?: Date;
  end?: Date;
  groupBy?: UsageGroupBy;
}

const UNIX_SECONDS = /^\d{1,12}(?:\.\d{1,9})?$/;
/** ISO 8601 date or date-time; a date-time without an offset is UTC. A space may stand for the
 * offset's "+", since an unencoded "+" in a query string arrives as a space. */
const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+\- ])(\d{2}):?(\d{2}))?)?$/;

/**
 * A point in time from a query parameter or CLI flag: Unix seconds ("1735689600", fractions
 * allowed) or an ISO 8601 date ("2025-01-01", UTC midnight) or date-time ("2025-01-01T12:00:00Z",
 * "2025-01-01T14:00+02:00"; no offset means UTC). Throws InvalidRequest naming `param`.
 */
export function parseUsageTime(value: string, param: string): Date {
  const text = value.trim();
  const bad = () =>
    new InvalidRequest(
      `Invalid '${param}': expected Unix seconds or an ISO 8601 date or date-time (e.g. 2025-01-01 or 2025-01-01T00:00:00Z), got ${JSON.stringify(value)}.`,
      param,
    );
  let date: Date;
  if (UNIX_SECONDS.test(text)) {
    const [whole, fraction = ""] = text.split(".");
    date = new Date(Number(whole) * 1000 + Number((fraction + "000").slice(0, 3)));
  } else {
    const m = ISO_TIME.exec(text);
    if (!m) throw bad();
    const part = (index: number) => Number(m[index] ?? 0);
    const [year, month, day, hour, minute, second] = [part(1), part(2), part(3), part(4), part(5), part(6)];
    const millis = Number(((m[7] ?? "") + "000").slice(0, 3));
    if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) throw bad();
    const asUtc = Date.UTC(year, month - 1, day, hour, minute, second, millis);
    const check = new Date(asUtc);
    if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day) throw bad(); // 2025-02-30
    let offsetMinutes = 0;
    if (m[9] !== undefined) {
      const offsetHours = Number(m[10]);
      const offsetMins = Number(m[11]);
      if (offsetHours > 23 || offsetMins > 59) throw bad();
      offsetMinutes = (m[9] === "-" ? -1 : 1) * (offsetHours * 60 + offsetMins);
    }
    date = new Date(asUtc - offsetMinutes * 60_000);
  }
  if (Number.isNaN(date.getTime())) throw bad();
  return date;
}

export function parseGroupBy(value: string, param = "group_by"): UsageGroupBy {
  const text = value.trim() as UsageGroupBy;
  if (!USAGE_GROUP_BY.includes(text)) {
    throw new InvalidRequest(`Invalid '${param}': expected one of ${USAGE_GROUP_BY.join(", ")}, got ${JSON.stringify(value)}.`, param);
  }
  return text;
}

/**
 * start, end and group_by from a parsed query string (other keys are ignored; an empty value is
 * the same as none). Throws InvalidRequest naming the offending parameter.
 */
export function parseUsageParams(query: unknown): UsageParams {
  const source = (query ?? {}) as Record<string, unknown>;
  const single = (param: string): string | undefined => {
    const value = source[param];
    if (value === undefined) return undefined;
    if (typeof value !== "string") throw new InvalidRequest(`Invalid '${param}': give it at most once.`, param);
    return value.trim() === "" ? undefined : value;
  };
  const startText = single("start");
  const endText = single("end");
  const groupText = single("group_by");
  const params: UsageParams = {};
  if (startText !== undefined) params.start = parseUsageTime(startText, "start");
  if (endText !== undefined) params.end = parseUsageTime(endText, "end");
  if (groupText !== undefined) params.groupBy = parseGroupBy(groupText);
  if (params.start && params.end && params.end.getTime() <= params.start.getTime()) {
    throw new InvalidRequest("Invalid 'end': it must be later than 'start'.", "end");
  }
  return params;
}

// ---------------------------------------------------------------------------------------------
// Wire shape (GET /v1/usage and GET /admin/v1/usage)

export interface WireUsageTotals extends Omit<UsageTotals, "cost_usd"> {
  /** Written by stringifyJson as a bare, exact JSON number. */
  cost_usd: ExactDecimal;
}

export interface WireUsage {
  object: "usage";
  /** Account name; the admin API only. */
  account?: string;
  /** Unix seconds (inclusive), or null for "from the beginning". */
  start: number | null;
  /** Unix seconds (exclusive), or null for "up to now". */
  end: number | null;
  group_by: UsageGroupBy | null;
  totals: WireUsageTotals;
  data: Array<{ group: string } & WireUsageTotals>;
  /** Dedicated instance time: seconds and cost as exact JSON numbers, in total and per deployment. */
  deployments?: { instance_seconds: ExactDecimal; cost_usd: ExactDecimal; data: Array<{ deployment_id: string; model_id: string; instance_seconds: ExactDecimal; cost_usd: ExactDecimal }> };
}

/** A usage report as the API sends it; serialise with stringifyJson so costs are exact numbers. */
export function toWireUsage(report: UsageReport, params: UsageParams & { account?: string }): WireUsage {
  const wireTotals = (totals: UsageTotals): WireUsageTotals => ({ ...totals, by_status: { ...totals.by_status }, cost_usd: ExactDecimal.of(totals.cost_usd) });
  return {
    object: "usage",
    ...(params.account === undefined ? {} : { account: params.account }),
    start: params.start ? params.start.getTime() / 1000 : null,
    end: params.end ? params.end.getTime() / 1000 : null,
    group_by: params.groupBy ?? null,
    totals: wireTotals(report.totals),
    data: report.groups.map(({ group, ...totals }) => ({ group, ...wireTotals(totals) })),
    ...(report.deployments ? { deployments: wireDeployments(report.deployments) } : {}),
  };
}

function wireDeployments(usage: InstanceUsage): NonNullable<WireUsage["deployments"]> {
  const exact = (d: { instance_seconds: string; cost_usd: string }) => ({ instance_seconds: ExactDecimal.of(d.instance_seconds), cost_usd: ExactDecimal.of(d.cost_usd) });
  return { ...exact(usage), data: usage.data.map((d) => ({ deployment_id: d.deployment_id, model_id: d.model_id, ...exact(d) })) };
}

/**
 * Reads a usage response body back without ever passing a cost through a float: every JSON number
 * is captured as its exact source text before JSON.parse sees it.
 */
export function parseWireUsage(text: string): UsageReport {
  const parsed = JSON.parse(quoteJsonNumbers(text)) as { totals?: unknown; data?: unknown; deployments?: InstanceUsage };
  if (!parsed || typeof parsed !== "object" || !Array.isArray(parsed.data)) throw new Error("The usage response is malformed.");
  return {
    totals: totalsFromWire(parsed.totals),
    groups: parsed.data.map((entry) => {
      const group = (entry as { group?: unknown } | null)?.group;
      if (typeof group !== "string") throw new Error("The usage response is malformed: a group has no name.");
      return { group, ...totalsFromWire(entry) };
    }),
    // Numbers were quoted above, so seconds and costs arrive as their exact text.
    ...(parsed.deployments ? { deployments: parsed.deployments } : {}),
  };
}

function totalsFromWire(value: unknown): UsageTotals {
  if (!value || typeof value !== "object") throw new Error("The usage response is malformed: totals are missing.");
  const v = value as Record<string, unknown>;
  const byStatus: Record<string, number> = {};
  for (const [status, n] of Object.entries((v.by_status ?? {}) as Record<string, unknown>)) byStatus[status] = toSafeInteger(n, `by_status.${status}`);
  return {
    requests: toSafeInteger(v.requests, "requests"),
    prompt_tokens: toSafeInteger(v.prompt_tokens, "prompt_tokens"),
    cached_tokens: toSafeInteger(v.cached_tokens, "cached_tokens"),
    completion_tokens: toSafeInteger(v.completion_tokens, "completion_tokens"),
    total_tokens: toSafeInteger(v.total_tokens, "total_tokens"),
    cost_usd: toText(parseMoney(v.cost_usd as string, "cost_usd")),
    by_status: byStatus,
  };
}

const JSON_NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** Valid JSON in, valid JSON out, with every number outside a string turned into a string of its text. */
function quoteJsonNumbers(text: string): string {
  let out = "";
  let copied = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
      i++;
    } else if (c === "-" || (c >= "0" && c <= "9")) {
      JSON_NUMBER.lastIndex = i;
      const match = JSON_NUMBER.exec(text);
      if (!match) return text; // not valid JSON; let JSON.parse report it
      out += `${text.slice(copied, i)}"${match[0]}"`;
      i += match[0].length;
      copied = i;
    } else {
      i++;
    }
  }
  return out + text.slice(copied);
}
