/**
 * Durable rows for requests while they run, so a crash loses no bill.
 *
 * A request's ledger row is written as `in_flight` when it is admitted, owned by this process and
 * carrying the prices it is billed at. As output is delivered its completion_tokens is kept at or
 * above what the client has received: the count is written *ahead*, in steps of `stepTokens` (the
 * first step with the row itself, so no write stands between prefill and the first token), by one
 * batched UPDATE for every request that needs it, so a stream waits only when it outruns the
 * writes. After a crash the row therefore bills at least what was delivered (at most one step
 * more), never less. recovery.ts closes a dead owner's rows.
 */
import type { DeliveryGuard, InFlightBegun, InFlightLedger, InFlightStart } from "./ports.js";
import { DEFAULT_RESERVATION_TTL_SECONDS, reservingUnbudgeted } from "./budgets.js";
import { parseNonNegative, toText } from "./decimal.js";
import { coalesced, valuesList } from "./coalesced.js";
import type { Database } from "../storage/database.js";

export interface InFlightOptions {
  /** How far ahead of delivery the durable count is written; default 16 tokens. */
  stepTokens?: number;
}

export interface InFlightLedgerHandle extends InFlightLedger {
  /** Waits for the writes under way. */
  drain(): Promise<void>;
}

interface Waiter {
  tokens: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

interface Tracked {
  requestId: string;
  /** Completion tokens the row is known to hold. */
  durable: number;
  /** Completion tokens to write next. */
  wanted: number;
  cached: number;
  max: number;
  waiters: Waiter[];
  closed: boolean;
}

/**
 * How long a row written beside its request's launch waits before its statement starts (see
 * coalesced.ts): long enough for the launch's messages to leave, far shorter than any prefill or
 * upstream's time to first token, which the row must be durable before.
 */
export const LAUNCH_HEAD_START_MS = 1;

export function createInFlightLedger(db: Database, ownerId: string, options: InFlightOptions = {}): InFlightLedgerHandle {
  const step = options.stepTokens ?? 16;
  const writeRow = coalesced((rows: NewRow[]) => writeRows(db, rows, ownerId, DEFAULT_RESERVATION_TTL_SECONDS));
  const counts = countWriter(db);
  return {
    async begin(start: InFlightStart): Promise<InFlightBegun> {
      // The row covers the first step from the start: the first tokens are delivered with no write
      // of their own on their way (the next step is written while they stream).
      const ahead = Math.min(start.maxCompletionTokens, step);
      const reserved = await writeRow({ start, ahead }, { afterMs: start.besideLaunch ? LAUNCH_HEAD_START_MS : 0 });
      const t: Tracked = {
        requestId: start.requestId,
        durable: ahead,
        wanted: ahead,
        cached: 0,
        max: start.maxCompletionTokens,
        waiters: [],
        closed: false,
      };
      return { guard: deliveryGuard(t, step, counts.schedule, () => counts.forget(t)), reserved };
    },
    drain: counts.drain,
  };
}

/**
 * The rows whose counts are to be raised, written by one loop: every request marked while a write
 * is under way goes in the next one (one UPDATE for all of them), and each write settles the
 * deliveries it covers.
 */
function countWriter(db: Database) {
  const dirty = new Set<Tracked>();
  let flushing: Promise<void> | null = null;
  const flushAll = async (): Promise<void> => {
    while (dirty.size > 0) {
      const batch = [...dirty].map((t) => ({ t, tokens: t.wanted, cached: t.cached }));
      dirty.clear();
      try {
        await writeCounts(db, batch);
        for (const { t, tokens } of batch) {
          t.durable = Math.max(t.durable, tokens);
          settleWaiters(
            t,
            (w) => w.tokens <= t.durable,
            (w) => w.resolve(),
          );
        }
      } catch (error) {
        for (const { t } of batch)
          settleWaiters(
            t,
            () => true,
            (w) => w.reject(error),
          );
      }
    }
  };
  // Cleared in the same step as the loop sees nothing left, so a request marked dirty after that
  // always starts a new loop.
  const flushLoop = async (): Promise<void> => {
    try {
      await flushAll();
    } finally {
      flushing = null;
    }
  };
  return {
    schedule(t: Tracked): void {
      dirty.add(t);
      flushing ??= flushLoop();
    },
    forget(t: Tracked): void {
      dirty.delete(t);
    },
    async drain(): Promise<void> {
      while (flushing) await flushing;
    },
  };
}

interface NewRow {
  start: InFlightStart;
  ahead: number;
}

/** One column of the admission row: its name in the statement's `q`, its type, and its value for a row. */
interface AdmissionColumn {
  name: string;
  type: string;
  value: (row: NewRow) => unknown;
}

/** The admission row, in the order of the VALUES list. */
const ADMISSION_COLUMNS: readonly AdmissionColumn[] = [
  { name: "request_id", type: "text", value: ({ start }) => start.requestId },
  { name: "account_id", type: "text", value: ({ start }) => start.accountId },
  { name: "key_id", type: "text", value: ({ start }) => start.keyId },
  { name: "model", type: "text", value: ({ start }) => start.model },
  { name: "api", type: "text", value: ({ start }) => start.api ?? "chat.completions" },
  { name: "service_tier", type: "text", value: ({ start }) => start.serviceTier },
  { name: "prompt_tokens", type: "int", value: ({ start }) => start.promptTokens },
  { name: "ahead", type: "int", value: ({ ahead }) => ahead },
  { name: "prices", type: "text", value: ({ start }) => JSON.stringify(start.prices) },
  { name: "batch_id", type: "text", value: ({ start }) => start.batchId ?? null },
  // Exact text, never a float.
  {
    name: "reserve_usd",
    type: "numeric",
    value: ({ start }) => (start.reserveUsd === undefined ? null : toText(parseNonNegative(start.reserveUsd, "reserveUsd"))),
  },
];
const ADMISSION_NAMES = ADMISSION_COLUMNS.map((column) => column.name).join(", ");
const ADMISSION_TYPES = ADMISSION_COLUMNS.map((column) => column.type);

/**
 * Inserts requests' in-flight rows and, for each that asks and whose key has no budget, its
 * reservation: one statement for all the requests admitted together (group commit: coalesced.ts),
 * so one commit on their way. Whether each reserved.
 */
async function writeRows(db: Database, rows: NewRow[], ownerId: string, reservationTtlSeconds: number): Promise<boolean[]> {
  const values = valuesList(
    rows.map((row) => ADMISSION_COLUMNS.map((column) => column.value(row))),
    ADMISSION_TYPES,
    3,
  );
  const reserved = await db.query<{ request_id: string }>(
    `WITH q (${ADMISSION_NAMES}) AS (VALUES ${values.sql}),
          reserved AS (${reservingUnbudgeted("q", "$2")}),
          written AS (INSERT INTO usage_records (request_id, account_id, key_id, model, api, service_tier, prompt_tokens, cached_tokens,
                                                 completion_tokens, cost_usd, status, duration_ms, owner_id, prices, batch_id)
                      SELECT request_id, account_id, key_id, model, api, service_tier, prompt_tokens, 0, ahead, 0, 'in_flight', 0, $1, prices, batch_id FROM q)
     SELECT request_id FROM reserved`,
    [ownerId, reservationTtlSeconds, ...values.params],
  );
  const ids = new Set(reserved.map((r) => r.request_id));
  return rows.map(({ start }) => ids.has(start.requestId));
}

/** Raises each row's completion count to at least what is to be delivered, in one statement for the batch. */
async function writeCounts(db: Database, batch: Array<{ t: Tracked; tokens: number; cached: number }>): Promise<void> {
  await db.query(
    `UPDATE usage_records AS u
        SET completion_tokens = GREATEST(u.completion_tokens, v.tokens), cached_tokens = v.cached
       FROM (SELECT unnest($1::text[]) AS id, unnest($2::int[]) AS tokens, unnest($3::int[]) AS cached) AS v
      WHERE u.request_id = v.id AND u.status = 'in_flight'`,
    [batch.map((b) => b.t.requestId), batch.map((b) => b.tokens), batch.map((b) => b.cached)],
  );
}

/** One request's guard: delivery waits only when it outruns the counts written `step` tokens ahead. */
function deliveryGuard(t: Tracked, step: number, schedule: (t: Tracked) => void, untrack: () => void): DeliveryGuard {
  return {
    cover(tokens, cachedTokens) {
      if (t.closed) return undefined;
      t.cached = cachedTokens;
      const ahead = Math.max(tokens, Math.min(t.max, tokens + step));
      if (tokens <= t.durable) {
        // Covered; write the next step early, once the stream is half way through this one.
        if (t.durable < t.max && tokens + step / 2 > t.durable && t.wanted < ahead) {
          t.wanted = ahead;
          schedule(t);
        }
        return undefined;
      }
      t.wanted = Math.max(t.wanted, ahead);
      schedule(t);
      return new Promise<void>((resolve, reject) => t.waiters.push({ tokens, resolve, reject }));
    },
    close() {
      t.closed = true;
      untrack();
      settleWaiters(
        t,
        () => true,
        (w) => w.resolve(),
      );
    },
  };
}

function settleWaiters(t: Tracked, which: (w: Waiter) => boolean, act: (w: Waiter) => void): void {
  const keep: Waiter[] = [];
  for (const w of t.waiters) which(w) ? act(w) : keep.push(w);
  t.waiters = keep;
}
