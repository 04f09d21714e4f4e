/**
 * A usage report: what the ledger sums for one account (tokens, exact cost, requests per status,
 * dedicated instance time), and its wire form both ways, so the user route, the admin route and the
 * CLI agree by construction. Serialise with stringifyJson so costs are exact JSON numbers.
 */
import { parse as parseJson } from "lossless-json";
import { ExactDecimal } from "./money-json.js";

/**
 * `in_flight` while a request runs (its row is written at admission); `interrupted` when its server
 * died and a later start (or another process) closed the row, billing what was delivered.
 */
export type UsageStatus = "completed" | "cancelled" | "failed" | "rejected" | "expired" | "in_flight" | "interrupted";

export type UsageGroupBy = "model" | "day" | "key";
export const USAGE_GROUP_BY: readonly UsageGroupBy[] = ["model", "day", "key"];

/** Every status a ledger row can have; `by_status` always lists all of them (zero when absent). */
export const USAGE_STATUSES: readonly UsageStatus[] = [
  "completed",
  "cancelled",
  "failed",
  "rejected",
  "expired",
  "in_flight",
  "interrupted",
];

export interface UsageTotals {
  /** Every recorded request, whatever its status. */
  requests: number;
  /** All prompt tokens, cached ones included. */
  prompt_tokens: number;
  /** The part of prompt_tokens served from the prompt cache. */
  cached_tokens: number;
  /** Billed completion tokens: the generated ones and the rejected prediction tokens. */
  completion_tokens: number;
  /** Prediction tokens that matched the output (Predicted Outputs). */
  accepted_prediction_tokens: number;
  /** Prediction tokens thrown away: billed at the output price, counted in completion_tokens. */
  rejected_prediction_tokens: number;
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

export interface DeploymentTime {
  deployment_id: string;
  /** `<account>/<name>`, the id its requests name. */
  model_id: string;
  /** Exact decimal seconds of running instances (millisecond resolution). */
  instance_seconds: string;
  /** Exact decimal US dollars. */
  cost_usd: string;
}

/** Dedicated instance time, billed apart from tokens; sums are exact decimal strings. */
export interface InstanceUsage {
  instance_seconds: string;
  cost_usd: string;
  /** One entry per deployment with billed time in the range, by model_id. */
  data: DeploymentTime[];
}

/** The range and grouping a report was asked for. */
export interface ReportRange {
  start?: Date;
  end?: Date;
  groupBy?: UsageGroupBy;
}

/** The reports `GET /v1/usage` and the admin API serve (billing/usage-reports.ts reads them from the ledger). */
export interface UsageReports {
  /** One account's usage in the range: its requests' tokens and exact cost, and its deployments' instance time. */
  ofAccount(accountId: string, range: ReportRange): Promise<UsageReport>;
}

/** An integer sum that arrived as text; refuses anything a JS number would not hold exactly. */
export function toSafeInteger(text: unknown, what: string): number {
  const value = typeof text === "string" && /^-?\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value)) throw new RangeError(`${what} is not a safe integer: ${String(text)}`);
  return value;
}

const exactCost = (value: unknown): string => {
  if (typeof value !== "string") throw new TypeError(`cost_usd must be a decimal, got ${typeof value}`);
  return ExactDecimal.of(value).text;
};

export interface WireUsageTotals extends Omit<UsageTotals, "cost_usd"> {
  /** Written by stringifyJson as a bare, exact JSON number. */
  cost_usd: ExactDecimal;
}

export interface WireUsageReport {
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
  deployments?: {
    instance_seconds: ExactDecimal;
    cost_usd: ExactDecimal;
    data: Array<{ deployment_id: string; model_id: string; instance_seconds: ExactDecimal; cost_usd: ExactDecimal }>;
  };
}

/** A usage report as the API sends it; serialise with stringifyJson so costs are exact numbers. */
export function toWireUsageReport(report: UsageReport, params: ReportRange & { account?: string }): WireUsageReport {
  const wireTotals = (totals: UsageTotals): WireUsageTotals => ({
    ...totals,
    by_status: { ...totals.by_status },
    cost_usd: ExactDecimal.of(totals.cost_usd),
  });
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

function wireDeployments(usage: InstanceUsage): NonNullable<WireUsageReport["deployments"]> {
  const exact = (d: { instance_seconds: string; cost_usd: string }) => ({
    instance_seconds: ExactDecimal.of(d.instance_seconds),
    cost_usd: ExactDecimal.of(d.cost_usd),
  });
  return { ...exact(usage), data: usage.data.map((d) => ({ deployment_id: d.deployment_id, model_id: d.model_id, ...exact(d) })) };
}

/**
 * Reads a usage response body back without ever passing a cost through a float: every JSON number
 * is captured as its exact source text before JSON.parse sees it.
 */
export function parseWireUsageReport(text: string): UsageReport {
  // Every number is kept as its source text (lossless-json), so seconds and costs stay exact.
  const parsed = parseJson(text, null, (value: string) => value) as { totals?: unknown; data?: unknown; deployments?: InstanceUsage };
  if (!parsed || typeof parsed !== "object" || !Array.isArray(parsed.data)) throw new Error("The usage response is malformed.");
  return {
    totals: totalsFromWire(parsed.totals),
    groups: parsed.data.map((entry) => {
      const group = (entry as { group?: unknown } | null)?.group;
      if (typeof group !== "string") throw new Error("The usage response is malformed: a group has no name.");
      return { group, ...totalsFromWire(entry) };
    }),
    ...(parsed.deployments ? { deployments: parsed.deployments } : {}),
  };
}

function totalsFromWire(value: unknown): UsageTotals {
  if (!value || typeof value !== "object") throw new Error("The usage response is malformed: totals are missing.");
  const v = value as Record<string, unknown>;
  const byStatus: Record<string, number> = {};
  for (const [status, n] of Object.entries((v.by_status ?? {}) as Record<string, unknown>))
    byStatus[status] = toSafeInteger(n, `by_status.${status}`);
  return {
    requests: toSafeInteger(v.requests, "requests"),
    prompt_tokens: toSafeInteger(v.prompt_tokens, "prompt_tokens"),
    cached_tokens: toSafeInteger(v.cached_tokens, "cached_tokens"),
    completion_tokens: toSafeInteger(v.completion_tokens, "completion_tokens"),
    // Absent from a server older than Predicted Outputs: none.
    accepted_prediction_tokens: toSafeInteger(v.accepted_prediction_tokens ?? "0", "accepted_prediction_tokens"),
    rejected_prediction_tokens: toSafeInteger(v.rejected_prediction_tokens ?? "0", "rejected_prediction_tokens"),
    total_tokens: toSafeInteger(v.total_tokens, "total_tokens"),
    cost_usd: exactCost(v.cost_usd),
    by_status: byStatus,
  };
}
