/**
 * Dedicated instance time in usage reports: the billed segments (deployment_usage, written by
 * deployments/metering.ts) of one account, per deployment, beside the token usage of its requests.
 * Sums are PostgreSQL numerics, read back as exact text.
 */
import type { Database } from "../storage/database.js";
import { parseMoney, toText } from "./decimal.js";
import type { DeploymentTime, InstanceUsage, UsageReport } from "../protocol/usage.js";
import { queryUsage, type UsageQuery } from "./ledger.js";

/** Segments are counted in the range their start falls in, as requests are by their creation. */
export async function queryInstanceUsage(db: Database, query: Omit<UsageQuery, "groupBy">): Promise<InstanceUsage> {
  const rows = await db.query<{ deployment_id: string; model_id: string; seconds: string; cost: string }>(
    `SELECT deployment_id, min(model_id) AS model_id, sum(seconds)::text AS seconds, sum(cost_usd)::text AS cost
       FROM deployment_usage
      WHERE account_id = $1
        AND ($2::timestamptz IS NULL OR start_at >= $2::timestamptz)
        AND ($3::timestamptz IS NULL OR start_at <  $3::timestamptz)
      GROUP BY deployment_id ORDER BY min(model_id), deployment_id`,
    [query.accountId, query.start?.toISOString() ?? null, query.end?.toISOString() ?? null],
  );
  const exact = (text: string, what: string) => toText(parseMoney(text, what));
  const data = rows.map((r) => ({
    deployment_id: r.deployment_id,
    model_id: r.model_id,
    instance_seconds: exact(r.seconds, "seconds"),
    cost_usd: exact(r.cost, "cost"),
  }));
  const sum = (pick: (d: DeploymentTime) => string) => toText(data.reduce((total, d) => total.plus(parseMoney(pick(d))), parseMoney("0")));
  return { instance_seconds: sum((d) => d.instance_seconds), cost_usd: sum((d) => d.cost_usd), data };
}

/** An account's whole usage: its requests' tokens and cost, and its deployments' instance time, apart. */
export async function queryAccountUsage(db: Database, query: UsageQuery): Promise<UsageReport> {
  const [report, deployments] = await Promise.all([queryUsage(db, query), queryInstanceUsage(db, query)]);
  return { ...report, deployments };
}
