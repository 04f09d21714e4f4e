/**
 * Deployment rows (migration 8). Every read by an account is scoped to it; the manager's own reads
 * (what to run, what to adopt) are scoped to an owner process.
 */
import { randomBytes } from "node:crypto";
import { InvalidRequest } from "../errors.js";
import type { Database } from "../storage/database.js";
import type { DeploymentLimits, DeploymentSettings, DeploymentStatus } from "./types.js";

export interface DeploymentRow {
  id: string;
  accountId: string;
  accountName: string;
  model: string;
  name: string;
  status: DeploymentStatus;
  failReason: string | null;
  settings: DeploymentSettings;
  ownerId: string | null;
  /** The key that created it: its budget pays the instance time (null: from before keys paid). */
  keyId: string | null;
  /** Instances with an open metering interval: the ones running, wherever. */
  openInstances: number;
  createdAt: Date;
  updatedAt: Date;
  deletedAt: Date | null;
}

interface Row {
  id: string;
  account_id: string;
  account_name: string;
  model: string;
  name: string;
  status: DeploymentStatus;
  fail_reason: string | null;
  min_instances: number;
  max_instances: number;
  max_batch_size: number;
  context_length: number | null;
  owner_id: string | null;
  key_id: string | null;
  open_instances: string | number;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

const SELECT = `
  SELECT d.*, a.name AS account_name,
         (SELECT count(*) FROM deployment_instances i WHERE i.deployment_id = d.id AND i.ended_at IS NULL) AS open_instances
    FROM deployments d JOIN accounts a ON a.id = d.account_id`;

export function newDeploymentId(): string {
  return `dep_${randomBytes(12).toString("base64url")}`;
}

export async function insertDeployment(
  db: Database,
  input: {
    accountId: string;
    keyId: string | null;
    model: string;
    name: string;
    status: DeploymentStatus;
    settings: DeploymentSettings;
    ownerId: string;
  },
  limits: DeploymentLimits,
): Promise<DeploymentRow> {
  const id = newDeploymentId();
  await db.transaction(async (tx) => {
    await checkAccountCaps(tx, input.accountId, null, input.settings.maxInstances, limits);
    // An uploaded adapter's model id is `<account>/<name>` too (adapters/adapter-store.ts checks the other way round).
    const adapters = await tx.query("SELECT 1 FROM adapters WHERE account_id = $1 AND name = $2 AND deleted_at IS NULL", [
      input.accountId,
      input.name,
    ]);
    if (adapters.length > 0) {
      throw new InvalidRequest(
        `This account has an uploaded adapter named '${input.name}' (its model id is the same). Choose another name, or delete the adapter first.`,
        "name",
        "name_taken",
      );
    }
    // The partial unique index (account, name) among the live ones decides races; a loser gets the 400.
    const inserted = await tx.query<{ id: string }>(
      `INSERT INTO deployments (id, account_id, model, name, status, min_instances, max_instances, max_batch_size, owner_id, key_id, context_length)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
       ON CONFLICT (account_id, name) WHERE deleted_at IS NULL DO NOTHING RETURNING id`,
      [
        id,
        input.accountId,
        input.model,
        input.name,
        input.status,
        input.settings.minInstances,
        input.settings.maxInstances,
        input.settings.maxBatchSize,
        input.ownerId,
        input.keyId,
        input.settings.contextLength,
      ],
    );
    if (inserted.length === 0) {
      throw new InvalidRequest(
        `This account already has a deployment named '${input.name}'. Choose another name, or delete that one first.`,
        "name",
        "deployment_exists",
      );
    }
  });
  return (await findDeployment(db, id))!;
}

/**
 * The per-account caps, under the account row's lock so that concurrent creates and scales are
 * counted one at a time: a new deployment (`changing` null) must stay within the deployment count,
 * and every deployment's max_instances together within the instance cap.
 */
async function checkAccountCaps(
  tx: Database,
  accountId: string,
  changing: string | null,
  maxInstances: number,
  limits: DeploymentLimits,
): Promise<void> {
  await tx.query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [accountId]);
  const [others] = await tx.query<{ count: string | number; instances: string | number }>(
    "SELECT count(*) AS count, COALESCE(sum(max_instances), 0) AS instances FROM deployments WHERE account_id = $1 AND deleted_at IS NULL AND id IS DISTINCT FROM $2",
    [accountId, changing],
  );
  if (changing === null && Number(others?.count ?? 0) >= limits.deploymentsPerAccount) {
    throw new InvalidRequest(
      `This account already has ${limits.deploymentsPerAccount} deployments, the most this server allows one account. Delete one first.`,
      "name",
      "too_many_deployments",
    );
  }
  const instances = Number(others?.instances ?? 0) + maxInstances;
  if (instances > limits.instancesPerAccount) {
    throw new InvalidRequest(
      `max_instances ${maxInstances} would let this account run ${instances} instances; this server allows one account ${limits.instancesPerAccount} (max_instances summed over its deployments).`,
      "max_instances",
      "too_many_instances",
    );
  }
}

export async function findDeployment(db: Database, id: string, scope: { accountId?: string } = {}): Promise<DeploymentRow | null> {
  const rows = await db.query<Row>(`${SELECT} WHERE d.id = $1 AND ($2::text IS NULL OR d.account_id = $2)`, [id, scope.accountId ?? null]);
  return rows[0] ? toDeployment(rows[0]) : null;
}

/** An account's deployments, newest first; the deleted ones only when asked for by status. */
export async function listDeployments(db: Database, accountId: string, status?: DeploymentStatus): Promise<DeploymentRow[]> {
  const rows = await db.query<Row>(
    `${SELECT} WHERE d.account_id = $1 AND (($2::text IS NULL AND d.status <> 'deleted') OR d.status = $2) ORDER BY d.created_at DESC, d.id`,
    [accountId, status ?? null],
  );
  return rows.map(toDeployment);
}

/**
 * Every deployment not yet deleted (those being deleted included), with its owner: what a process
 * runs, adopts, finishes deleting, or knows to be elsewhere.
 */
export async function liveDeployments(db: Database): Promise<DeploymentRow[]> {
  return (await db.query<Row>(`${SELECT} WHERE d.status <> 'deleted' ORDER BY d.created_at`)).map(toDeployment);
}

export async function setStatus(db: Database, id: string, status: DeploymentStatus, failReason: string | null = null): Promise<void> {
  await db.query(
    `UPDATE deployments SET status = $2, fail_reason = $3, updated_at = now(),
            deleted_at = CASE WHEN $2 = 'deleted' THEN coalesce(deleted_at, now()) ELSE deleted_at END
      WHERE id = $1`,
    [id, status, failReason],
  );
}

export async function updateSettings(
  db: Database,
  row: DeploymentRow,
  settings: DeploymentSettings,
  limits: DeploymentLimits,
): Promise<void> {
  await db.transaction(async (tx) => {
    if (settings.maxInstances > row.settings.maxInstances) await checkAccountCaps(tx, row.accountId, row.id, settings.maxInstances, limits);
    await tx.query("UPDATE deployments SET min_instances = $2, max_instances = $3, updated_at = now() WHERE id = $1", [
      row.id,
      settings.minInstances,
      settings.maxInstances,
    ]);
  });
}

/**
 * Stopped from outside its settings (a disabled account, a spent budget): min_instances 0 in the
 * database too, so that no process starts it again until it is scaled up. Returns the ids.
 */
export async function stopDeployments(
  db: Database,
  scope: { accountId: string } | { id: string },
  status: "stopped" | "failed",
  reason: string,
): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `UPDATE deployments SET min_instances = 0, status = $3, fail_reason = $4, updated_at = now()
      WHERE ($1::text IS NULL OR account_id = $1) AND ($2::text IS NULL OR id = $2) AND deleted_at IS NULL RETURNING id`,
    ["accountId" in scope ? scope.accountId : null, "id" in scope ? scope.id : null, status, reason],
  );
  return rows.map((r) => r.id);
}

/** Asked to be deleted: the name is free at once; the owner drains it and marks it deleted. */
export async function markDeleting(db: Database, id: string): Promise<void> {
  await db.query("UPDATE deployments SET deleted_at = coalesce(deleted_at, now()), updated_at = now() WHERE id = $1", [id]);
}

/** Takes a deployment over from `from` (a dead owner, or none): compare-and-set, so only one process wins. */
export async function claimDeployment(db: Database, id: string, from: string | null, to: string | null): Promise<boolean> {
  const rows = await db.query("UPDATE deployments SET owner_id = $3 WHERE id = $1 AND owner_id IS NOT DISTINCT FROM $2 RETURNING id", [
    id,
    from,
    to,
  ]);
  return rows.length > 0;
}

/**
 * The URL of the server process that runs an account's live deployment `name`, when that is not
 * `self` and the process has recorded where it listens; null otherwise.
 */
export async function ownerUrlOf(db: Database, accountId: string, name: string, self: string): Promise<string | null> {
  const rows = await db.query<{ url: string }>(
    `SELECT o.url FROM deployments d JOIN server_owners o ON o.id = d.owner_id
      WHERE d.account_id = $1 AND d.name = $2 AND d.deleted_at IS NULL AND d.owner_id <> $3 AND o.url IS NOT NULL`,
    [accountId, name, self],
  );
  return rows[0]?.url ?? null;
}

function toDeployment(row: Row): DeploymentRow {
  return {
    id: row.id,
    accountId: row.account_id,
    accountName: row.account_name,
    model: row.model,
    name: row.name,
    status: row.status,
    failReason: row.fail_reason,
    settings: {
      minInstances: row.min_instances,
      maxInstances: row.max_instances,
      maxBatchSize: row.max_batch_size,
      contextLength: row.context_length,
    },
    ownerId: row.owner_id,
    keyId: row.key_id,
    openInstances: Number(row.open_instances),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    deletedAt: row.deleted_at,
  };
}
