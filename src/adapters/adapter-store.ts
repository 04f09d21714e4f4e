/**
 * Uploaded adapters' rows (migration 18). Every read by an account is scoped to it; the start-up
 * reload reads every live row.
 */
import { randomBytes } from "node:crypto";
import { InvalidRequest, ServiceError } from "../errors.js";
import type { Database } from "../storage/database.js";
import type { Adapter, AdapterFormat, AdapterLimits, AdapterStatus } from "./types.js";

interface Row {
  id: string;
  account_id: string;
  account_name: string;
  name: string;
  base_model: string;
  format: AdapterFormat;
  bytes: string | number;
  sha256: string;
  status: AdapterStatus;
  fail_reason: string | null;
  created_at: Date | string;
}

const SELECT = "SELECT ad.*, a.name AS account_name FROM adapters ad JOIN accounts a ON a.id = ad.account_id";

export const newAdapterId = (): string => `adp_${randomBytes(12).toString("base64url")}`;

/**
 * The caps an account's new adapter must fit, under the account row's lock (held by the caller's
 * transaction) so that uploads and deployments are counted one at a time: fewer than `perAccount`
 * live adapters, and `name` (when given) no live adapter's or deployment's: both are `<account>/<name>`.
 */
export async function checkAccountRoom(tx: Database, accountId: string, name: string | null, limits: Pick<AdapterLimits, "perAccount">) {
  const [found] = await tx.query<{ count: string | number; taken: boolean }>(
    `SELECT count(*) AS count,
            bool_or(name = $2) OR EXISTS (SELECT 1 FROM deployments WHERE account_id = $1 AND name = $2 AND deleted_at IS NULL) AS taken
       FROM adapters WHERE account_id = $1 AND deleted_at IS NULL`,
    [accountId, name],
  );
  if (name !== null && found?.taken === true) {
    throw new ServiceError(
      409,
      "invalid_request_error",
      `This account already has a model named '${name}' (an adapter or a deployment). Choose another name, or delete that one first.`,
      "name_taken",
      "name",
    );
  }
  if (Number(found?.count ?? 0) >= limits.perAccount) {
    throw new InvalidRequest(
      `This account already has ${limits.perAccount} adapters, the most this server allows one account. Delete one first.`,
      null,
      "too_many_adapters",
    );
  }
}

/** Keeps a converted, loaded adapter: its caps checked again under the account's lock (an upload or deployment may have raced it). */
export async function insertAdapter(db: Database, adapter: Omit<Adapter, "modelId">, limits: AdapterLimits): Promise<Adapter> {
  await db.transaction(async (tx) => {
    await tx.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [adapter.accountId]);
    await checkAccountRoom(tx, adapter.accountId, adapter.name, limits);
    await tx.query(
      `INSERT INTO adapters (id, account_id, name, base_model, format, bytes, sha256, status, fail_reason, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        adapter.id,
        adapter.accountId,
        adapter.name,
        adapter.baseModel,
        adapter.format,
        adapter.bytes,
        adapter.sha256,
        adapter.status,
        adapter.failReason,
        adapter.createdAt,
      ],
    );
  });
  return (await findAdapter(db, adapter.id))!;
}

/** A live adapter (`accountId`: only that account's). */
export async function findAdapter(db: Database, id: string, accountId?: string): Promise<Adapter | null> {
  const rows = await db.query<Row>(`${SELECT} WHERE ad.id = $1 AND ($2::text IS NULL OR ad.account_id = $2) AND ad.deleted_at IS NULL`, [
    id,
    accountId ?? null,
  ]);
  return rows[0] ? toAdapter(rows[0]) : null;
}

/** An account's live adapters, newest first; every account's with none given (the start-up reload, oldest first). */
export async function listAdapters(db: Database, accountId?: string): Promise<Adapter[]> {
  const order = accountId === undefined ? "ad.created_at, ad.id" : "ad.created_at DESC, ad.id";
  const rows = await db.query<Row>(`${SELECT} WHERE ($1::text IS NULL OR ad.account_id = $1) AND ad.deleted_at IS NULL ORDER BY ${order}`, [
    accountId ?? null,
  ]);
  return rows.map(toAdapter);
}

/** The ids among `ids` of adapters deleted or never kept: their files may go. */
export async function goneAdapterIds(db: Database, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const live = await db.query<{ id: string }>("SELECT id FROM adapters WHERE id = ANY($1::text[]) AND deleted_at IS NULL", [ids]);
  const kept = new Set(live.map((row) => row.id));
  return ids.filter((id) => !kept.has(id));
}

/** Marks an account's live adapter deleted (its name free at once); null when there is none. */
export async function markDeleted(db: Database, accountId: string, id: string): Promise<Adapter | null> {
  const rows = await db.query<{ id: string }>(
    "UPDATE adapters SET deleted_at = now() WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL RETURNING id",
    [id, accountId],
  );
  if (rows.length === 0) return null;
  const [row] = await db.query<Row>(`${SELECT} WHERE ad.id = $1`, [id]);
  return toAdapter(row!);
}

export async function setStatus(db: Database, id: string, status: AdapterStatus, failReason: string | null): Promise<void> {
  // A reason may quote the file (a tensor's name): PostgreSQL text cannot hold NUL.
  await db.query("UPDATE adapters SET status = $2, fail_reason = $3 WHERE id = $1", [
    id,
    status,
    failReason === null ? null : failReason.replaceAll("\u0000", ""),
  ]);
}

function toAdapter(row: Row): Adapter {
  return {
    id: row.id,
    accountId: row.account_id,
    name: row.name,
    modelId: `${row.account_name}/${row.name}`,
    baseModel: row.base_model,
    format: row.format,
    bytes: Number(row.bytes),
    sha256: row.sha256,
    status: row.status,
    failReason: row.fail_reason,
    createdAt: new Date(row.created_at),
  };
}
