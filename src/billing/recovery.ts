/**
 * Which server process owns which in-flight rows, and closing the rows of a process that died.
 *
 * Each serving process registers an owner row. On PostgreSQL it also holds a session advisory lock
 * on the owner's `lock_key` for as long as it lives (on a connection of its own), so PostgreSQL
 * itself says when an owner is gone: its lock is free. On PGlite only one process can have the
 * database open (the data dir is locked), so every other owner is dead by construction.
 *
 * A dead owner's `in_flight` rows are billed for what they delivered (their completion_tokens is
 * written ahead of delivery, see in-flight.ts), marked `interrupted`, and their budget reservations
 * turned into spend, all in one transaction per owner.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { TokenPrices } from "../catalog/types.js";
import type { Database } from "../storage/database.js";
import { requestCost } from "./cost.js";
import { chargeReservation } from "./budgets.js";
import { holdAdvisoryLock } from "../storage/postgres.js";

export interface Owner {
  id: string;
  /** A signed 64-bit integer, as text: the advisory lock key. */
  lockKey: string;
}

export function newOwner(): Owner {
  return { id: `own_${randomBytes(12).toString("base64url")}`, lockKey: randomBytes(8).readBigInt64BE().toString() };
}

export async function registerOwner(db: Database, owner: Owner): Promise<void> {
  await db.query("INSERT INTO server_owners (id, lock_key, pid, host) VALUES ($1, $2, $3, $4)", [owner.id, owner.lockKey, process.pid, hostname()]);
}

export async function unregisterOwner(db: Database, owner: Owner): Promise<void> {
  await db.query("DELETE FROM server_owners WHERE id = $1", [owner.id]);
}

/** Whether an owner's process is gone; asked inside the transaction that would close its rows. */
async function isDead(tx: Database, self: Owner, other: { id: string; lock_key: string }): Promise<boolean> {
  if (other.id === self.id) return false;
  if (tx.kind === "pglite") return true;
  // Held by a live owner for its whole life; ours until this transaction ends if the owner is gone.
  const rows = await tx.query<{ free: boolean }>("SELECT pg_try_advisory_xact_lock($1::bigint) AS free", [other.lock_key]);
  return rows[0]?.free === true;
}

/**
 * Whether the process behind an owner id is gone: no owner row (a reconciliation already removed
 * it, or it never was), or a dead one. For other per-owner state (a deployment's instances).
 */
export async function ownerIsGone(tx: Database, self: Owner, ownerId: string): Promise<boolean> {
  if (ownerId === self.id) return false;
  const [row] = await tx.query<{ id: string; lock_key: string }>("SELECT id, lock_key::text AS lock_key FROM server_owners WHERE id = $1", [ownerId]);
  return !row || (await isDead(tx, self, row));
}

export interface Reconciled {
  owners: number;
  rows: number;
}

/** Closes the in-flight rows of every dead owner, and of rows whose owner is unknown. */
export async function reconcileDeadOwners(db: Database, self: Owner): Promise<Reconciled> {
  const result: Reconciled = { owners: 0, rows: 0 };
  const owners = await db.query<{ id: string; lock_key: string }>("SELECT id, lock_key::text AS lock_key FROM server_owners WHERE id <> $1", [self.id]);
  for (const owner of owners) {
    await db.transaction(async (tx) => {
      if (!(await isDead(tx, self, owner))) return;
      result.rows += await closeRows(tx, "owner_id = $1", [owner.id]);
      await tx.query("DELETE FROM server_owners WHERE id = $1", [owner.id]);
      result.owners++;
    });
  }
  // Rows whose owner row is gone (or never was) have no live process behind them either.
  result.rows += await db.transaction((tx) =>
    closeRows(tx, "(owner_id IS NULL OR NOT EXISTS (SELECT 1 FROM server_owners o WHERE o.id = usage_records.owner_id))", []),
  );
  return result;
}

interface InFlightRow {
  request_id: string;
  key_id: string;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  prices: string | null;
  batch_id: string | null;
}

async function closeRows(tx: Database, where: string, params: unknown[]): Promise<number> {
  // FOR UPDATE, and the status test again after the lock: a concurrent reconciler's rows are skipped.
  const rows = await tx.query<InFlightRow>(
    `SELECT request_id, key_id, prompt_tokens, cached_tokens, completion_tokens, prices, batch_id
       FROM usage_records WHERE status = 'in_flight' AND ${where} FOR UPDATE`,
    params,
  );
  for (const row of rows) {
    // A batch line's attempt cut short is not billed: the line runs again and is billed once, for the answer it keeps.
    const cost = row.completion_tokens > 0 && row.prices && !row.batch_id ? requestCost(JSON.parse(row.prices) as TokenPrices, { promptTokens: row.prompt_tokens, cachedPromptTokens: row.cached_tokens, completionTokens: row.completion_tokens }) : "0";
    await chargeReservation(tx, row.key_id, row.request_id, cost);
    await tx.query(
      `UPDATE usage_records
          SET status = 'interrupted', cost_usd = $2::numeric, error_code = 'server_interrupted',
              duration_ms = LEAST(2147483647, GREATEST(0, (extract(epoch FROM now() - created_at) * 1000)::bigint))
        WHERE request_id = $1 AND status = 'in_flight'`,
      [row.request_id, cost],
    );
  }
  return rows.length;
}

export interface Ownership {
  owner: Owner;
  /** What the reconciliation at start closed. */
  recovered: Reconciled;
  /** Records the URL this process listens on, so other gateways can forward its deployments' requests to it. */
  advertise(url: string): Promise<void>;
  /** Stops the periodic reconciliation, removes the owner row and frees its lock. Call after the last request ended. */
  close(): Promise<void>;
}

/** How often a PostgreSQL deployment looks for the rows of a replica that died while the others run. */
const RECONCILE_INTERVAL_MS = 60_000;

/**
 * Registers this process as an owner (holding its lock on PostgreSQL), then closes the rows of every
 * dead owner. On PostgreSQL that is repeated every minute, so a replica that dies while the others
 * keep running has its rows closed without waiting for a restart.
 */
export async function takeOwnership(db: Database, databaseUrl: string | undefined, log: (message: string) => void): Promise<Ownership> {
  const owner = newOwner();
  const held = db.kind === "postgres" && databaseUrl ? await holdAdvisoryLock(databaseUrl, owner.lockKey, (e) => log(`owner lock connection: ${e.message}`)) : null;
  await registerOwner(db, owner);
  const recovered = await reconcileDeadOwners(db, owner);
  let timer: NodeJS.Timeout | undefined;
  if (held) {
    timer = setInterval(() => {
      reconcileDeadOwners(db, owner)
        .then((r) => r.rows > 0 && log(`closed ${r.rows} in-flight ledger rows of ${r.owners} dead server process(es)`))
        .catch((e: Error) => log(`reconciling dead owners failed: ${e.message}`));
    }, RECONCILE_INTERVAL_MS).unref();
  }
  return {
    owner,
    recovered,
    async advertise(url) {
      await db.query("UPDATE server_owners SET url = $2 WHERE id = $1", [owner.id, url]);
    },
    async close() {
      clearInterval(timer);
      await unregisterOwner(db, owner).catch((e: Error) => log(`removing the owner row failed: ${e.message}`));
      await held?.release();
    },
  };
}
