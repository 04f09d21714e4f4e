/**
 * Which server process owns which rows: each serving process registers an owner row. On PostgreSQL it
 * also holds a session advisory lock on the owner's `lock_key` for as long as it lives (on a
 * connection of its own), so PostgreSQL itself says when an owner is gone: its lock is free. On
 * PGlite only one process can have the database open (the data dir is locked), so every other owner
 * is dead by construction. Billing closes a dead owner's in-flight rows (billing/recovery.ts);
 * deployments forward to the URL an owner advertises.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Database } from "../storage/database.js";
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
  await db.query("INSERT INTO server_owners (id, lock_key, pid, host) VALUES ($1, $2, $3, $4)", [
    owner.id,
    owner.lockKey,
    process.pid,
    hostname(),
  ]);
}

export async function unregisterOwner(db: Database, owner: Owner): Promise<void> {
  await db.query("DELETE FROM server_owners WHERE id = $1", [owner.id]);
}

/** Whether an owner's process is gone; asked inside the transaction that would close its rows. */
export async function ownerIsDead(tx: Database, self: Owner, other: { id: string; lock_key: string }): Promise<boolean> {
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
  const [row] = await tx.query<{ id: string; lock_key: string }>("SELECT id, lock_key::text AS lock_key FROM server_owners WHERE id = $1", [
    ownerId,
  ]);
  return !row || (await ownerIsDead(tx, self, row));
}

/** What closing the dead owners' leftovers did. */
export interface DeadOwnersClosed {
  owners: number;
  rows: number;
}

export type CloseDeadOwners = (db: Database, self: Owner) => Promise<DeadOwnersClosed>;

export interface Ownership {
  owner: Owner;
  /** What the reconciliation at start closed. */
  recovered: DeadOwnersClosed;
  /** Records the URL this process listens on, so other gateways can forward its deployments' requests to it. */
  advertise(url: string): Promise<void>;
  /** Stops the periodic reconciliation, removes the owner row and frees its lock. Call after the last request ended. */
  close(): Promise<void>;
}

/** How often a PostgreSQL deployment looks for the rows of a replica that died while the others run. */
const RECONCILE_INTERVAL_MS = 60_000;

/**
 * Registers this process as an owner (holding its lock on PostgreSQL), then closes what every dead
 * owner left open (`closeDeadOwners`: billing closes their in-flight ledger rows). On PostgreSQL that is repeated every minute, so a replica that dies while the others
 * keep running has its rows closed without waiting for a restart.
 */
export async function takeOwnership(
  db: Database,
  databaseUrl: string | undefined,
  closeDeadOwners: CloseDeadOwners,
  log: (message: string) => void,
): Promise<Ownership> {
  const owner = newOwner();
  const held =
    db.kind === "postgres" && databaseUrl
      ? await holdAdvisoryLock(databaseUrl, owner.lockKey, (e) => log(`owner lock connection: ${e.message}`))
      : null;
  await registerOwner(db, owner);
  const recovered = await closeDeadOwners(db, owner);
  let timer: NodeJS.Timeout | undefined;
  if (held) {
    timer = setInterval(() => {
      closeDeadOwners(db, owner)
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
