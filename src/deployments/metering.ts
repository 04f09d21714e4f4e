/**
 * Instance time, metered into the database so that every millisecond an instance ran is billed
 * exactly once, across restarts and crashes.
 *
 * An instance's interval row opens when it starts running and carries a heartbeat its process
 * renews. Billed segments go to `deployment_usage` in the same transaction that advances the
 * interval's `billed_until`, under a row lock, keyed (instance, start): whole segments as the
 * heartbeat passes them (an hour by default), the rest when the instance stops. An interval whose
 * process died is closed at its last heartbeat by whichever process notices (at start, or on its
 * periodic check), so a crash is never billed beyond what surely ran, and never twice.
 */
import { randomBytes } from "node:crypto";
import { settleInstanceTime } from "../billing/instance-budget.js";
import { addMoney } from "../billing/cost.js";
import { instanceTimeCost, millisecondsToSeconds, segmentCost, segmentsToBill } from "../billing/instance-time.js";
import type { Database } from "../storage/database.js";

/** The database clock, cut to whole milliseconds so that JS Dates carry it exactly. */
const NOW = "date_trunc('milliseconds', now())";

export interface InstanceMeter {
  /** Opens interval `id` (from newInstanceId) for an instance that has just started running. */
  open(id: string, deploymentId: string, hourlyUsd: string): Promise<void>;
  /**
   * Renews this process's open intervals and bills the whole segments they have completed.
   * Returns the deployments whose paying key's budget cannot cover an instance's next segment.
   */
  heartbeat(): Promise<Set<string>>;
  /** The instance stopped: closes its interval now and bills the rest. */
  close(instanceId: string): Promise<void>;
}

/** An instance's id: its interval's, and its budget hold's (taken before it loads). */
export function newInstanceId(): string {
  return `ins_${randomBytes(12).toString("base64url")}`;
}

export function createInstanceMeter(db: Database, ownerId: string, segmentMs: number): InstanceMeter {
  return {
    async open(id, deploymentId, hourlyUsd) {
      await db.query(
        `INSERT INTO deployment_instances (id, deployment_id, owner_id, hourly_usd, started_at, heartbeat_at, billed_until)
         VALUES ($1, $2, $3, $4::numeric, ${NOW}, ${NOW}, ${NOW})`,
        [id, deploymentId, ownerId, hourlyUsd],
      );
    },
    async heartbeat() {
      const renewed = await db.query<{ id: string; due: boolean }>(
        `UPDATE deployment_instances SET heartbeat_at = ${NOW}
          WHERE owner_id = $1 AND ended_at IS NULL
          RETURNING id, (heartbeat_at - billed_until) >= make_interval(secs => $2::double precision / 1000) AS due`,
        [ownerId, segmentMs],
      );
      const uncovered = new Set<string>();
      for (const { id, due } of renewed) {
        if (!due) continue;
        const billed = await db.transaction((tx) => billInstance(tx, id, segmentMs));
        if (!billed.covered) uncovered.add(billed.deploymentId);
      }
      return uncovered;
    },
    async close(instanceId) {
      await db.transaction(async (tx) => {
        await tx.query(`UPDATE deployment_instances SET ended_at = ${NOW}, heartbeat_at = ${NOW} WHERE id = $1 AND ended_at IS NULL`, [
          instanceId,
        ]);
        await billInstance(tx, instanceId, segmentMs);
      });
    },
  };
}

interface IntervalRow {
  deployment_id: string;
  hourly: string;
  billed_until: Date;
  heartbeat_at: Date;
  ended_at: Date | null;
  account_id: string;
  model_id: string;
  key_id: string | null;
}

/**
 * Bills an interval up to its heartbeat (whole segments only) or, once ended, up to its end.
 * Must run in a transaction: the row lock makes a concurrent biller wait, then see the advanced
 * billed_until and bill nothing twice.
 */
export async function billInstance(
  tx: Database,
  instanceId: string,
  segmentMs: number,
): Promise<{ segments: number; deploymentId: string; covered: boolean }> {
  const [row] = await tx.query<IntervalRow>(
    `SELECT i.deployment_id, i.hourly_usd::text AS hourly, i.billed_until, i.heartbeat_at, i.ended_at, d.account_id, d.key_id, a.name || '/' || d.name AS model_id
       FROM deployment_instances i JOIN deployments d ON d.id = i.deployment_id JOIN accounts a ON a.id = d.account_id
      WHERE i.id = $1 FOR UPDATE OF i`,
    [instanceId],
  );
  if (!row) return { segments: 0, deploymentId: "", covered: true };
  const until = (row.ended_at ?? row.heartbeat_at).getTime();
  const segments = segmentsToBill(row.billed_until.getTime(), until, segmentMs, row.ended_at !== null);
  let billedUsd = "0";
  for (const { startMs, endMs } of segments) {
    const seconds = millisecondsToSeconds(endMs - startMs);
    const cost = instanceTimeCost(seconds, row.hourly);
    const inserted = await tx.query(
      `INSERT INTO deployment_usage (instance_id, start_at, end_at, deployment_id, account_id, model_id, seconds, hourly_usd, cost_usd)
       VALUES ($1, $2, $3, $4, $5, $6, $7::numeric, $8::numeric, $9::numeric) ON CONFLICT DO NOTHING RETURNING instance_id`,
      [instanceId, new Date(startMs), new Date(endMs), row.deployment_id, row.account_id, row.model_id, seconds, row.hourly, cost],
    );
    // Spend follows the ledger: a segment already there is not charged again.
    if (inserted.length > 0) billedUsd = addMoney(billedUsd, cost);
  }
  const last = segments.at(-1);
  if (last) await tx.query("UPDATE deployment_instances SET billed_until = $2 WHERE id = $1", [instanceId, new Date(last.endMs)]);
  let covered = true;
  if (row.key_id !== null && (last || row.ended_at !== null)) {
    // The next segment is held while the instance runs (twice its length, so a late heartbeat never lapses it).
    const next = row.ended_at === null ? { amountUsd: segmentCost(row.hourly, segmentMs), holdMs: 2 * segmentMs + 60_000 } : null;
    covered = await settleInstanceTime(tx, row.key_id, instanceId, billedUsd, next);
  }
  return { segments: segments.length, deploymentId: row.deployment_id, covered };
}

/**
 * Closes every open interval whose owner process is gone, at its last heartbeat, and bills it.
 * `isGone` is asked inside the transaction that closes the owner's rows (see billing/recovery.ts).
 */
export async function closeDeadIntervals(
  db: Database,
  selfId: string,
  isGone: (tx: Database, ownerId: string) => Promise<boolean>,
  segmentMs: number,
): Promise<number> {
  const owners = await db.query<{ owner_id: string }>(
    "SELECT DISTINCT owner_id FROM deployment_instances WHERE ended_at IS NULL AND owner_id <> $1",
    [selfId],
  );
  let closed = 0;
  for (const { owner_id: ownerId } of owners) {
    closed += await db.transaction(async (tx) => {
      if (!(await isGone(tx, ownerId))) return 0;
      const rows = await tx.query<{ id: string }>(
        "UPDATE deployment_instances SET ended_at = heartbeat_at WHERE owner_id = $1 AND ended_at IS NULL RETURNING id",
        [ownerId],
      );
      for (const { id } of rows) await billInstance(tx, id, segmentMs);
      return rows.length;
    });
  }
  return closed;
}
