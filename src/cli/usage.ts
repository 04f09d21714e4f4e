import { Command, InvalidArgumentError, Option } from "commander";
import { openKeyAdmin } from "../accounts/key-admin.js";
import { parseUsageTime } from "../protocol/usage-request.js";
import { toWireUsageReport, USAGE_GROUP_BY, type UsageGroupBy, type UsageReport, type UsageTotals } from "../protocol/usage.js";
import { stringifyJson } from "../protocol/money-json.js";
import { resolveDataDir } from "../config/paths.js";
import { ServiceError } from "../errors.js";

export interface UsageCommandOptions {
  /** Where output goes; tests pass a collector. Defaults to process.stdout. */
  stdout?: { write(text: string): unknown };
}

interface UsageFlags {
  account: string;
  start?: Date;
  end?: Date;
  groupBy?: UsageGroupBy;
  json?: boolean;
  dataDir?: string;
}

/**
 * `switchyard usage --account NAME [--start T] [--end T] [--group-by model|day|key] [--json]`:
 * one account's usage and exact cost. Works whether or not a server runs on the same data dir.
 */
export function usageCommand(options: UsageCommandOptions = {}): Command {
  const stdout = options.stdout ?? process.stdout;
  const print = (line = "") => stdout.write(`${line}\n`);

  return new Command("usage")
    .description("Show an account's usage: requests, tokens and exact cost in US dollars")
    .requiredOption("--account <name>", "the account to report on")
    .option("--start <time>", "from this time, inclusive: Unix seconds or ISO 8601 (UTC unless an offset is given)", (value) =>
      cliTime(value, "--start"),
    )
    .option("--end <time>", "up to this time, exclusive: Unix seconds or ISO 8601 (UTC unless an offset is given)", (value) =>
      cliTime(value, "--end"),
    )
    .addOption(new Option("--group-by <field>", "one row per model, UTC day or key").choices(USAGE_GROUP_BY))
    .option("--json", "print the API's JSON (exact decimal costs) instead of a table")
    .option("--data-dir <dir>", "data directory (default: SWITCHYARD_DATA_DIR or ~/.local/share/switchyard)")
    .action(async (flags: UsageFlags) => {
      if (flags.start && flags.end && flags.end.getTime() <= flags.start.getTime()) {
        throw new InvalidArgumentError("--end must be later than --start.");
      }
      const admin = await openKeyAdmin(resolveDataDir(flags.dataDir));
      let report: UsageReport;
      try {
        report = await admin.usage({ account: flags.account, start: flags.start, end: flags.end, groupBy: flags.groupBy });
      } finally {
        await admin.close();
      }
      if (flags.json) {
        const wire = toWireUsageReport(report, {
          account: flags.account.trim(),
          start: flags.start,
          end: flags.end,
          groupBy: flags.groupBy,
        });
        print(stringifyJson(wire, 2));
      } else {
        print(formatUsage(flags.account.trim(), report, flags));
      }
    });
}

function cliTime(value: string, flag: string): Date {
  try {
    return parseUsageTime(value, flag);
  } catch (error) {
    if (error instanceof ServiceError)
      throw new InvalidArgumentError("Expected Unix seconds or an ISO 8601 date or date-time (e.g. 2025-01-01 or 2025-01-01T00:00:00Z).");
    throw error;
  }
}

const GROUP_TITLES: Record<UsageGroupBy, string> = { model: "MODEL", day: "DAY (UTC)", key: "KEY" };

/** A header line, a table (groups, then a TOTAL row) and a per-status line. Costs exact, never rounded. */
export function formatUsage(account: string, report: UsageReport, range: { start?: Date; end?: Date; groupBy?: UsageGroupBy }): string {
  const from = range.start ? ` from ${range.start.toISOString()}` : "";
  const to = range.end ? ` until ${range.end.toISOString()}` : "";
  const lines = [`Usage for account '${account}'${from || to ? `${from}${to}` : " (all time)"}:`, ""];

  const header = [
    range.groupBy ? GROUP_TITLES[range.groupBy] : "",
    "REQUESTS",
    "PROMPT",
    "CACHED",
    "COMPLETION",
    "TOTAL TOKENS",
    "COST (USD)",
  ];
  const row = (label: string, totals: UsageTotals) => [
    label,
    String(totals.requests),
    String(totals.prompt_tokens),
    String(totals.cached_tokens),
    String(totals.completion_tokens),
    String(totals.total_tokens),
    totals.cost_usd,
  ];
  const rows = [...report.groups.map((group) => row(group.group, group)), row("TOTAL", report.totals)];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((cells) => cells[column]?.length ?? 0)));
  const render = (cells: string[]) =>
    cells
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)))
      .join("  ")
      .trimEnd();
  lines.push(render(header), ...rows.map(render));

  const statuses = Object.entries(report.totals.by_status).filter(([, count]) => count > 0);
  lines.push(
    "",
    `By status: ${statuses.length === 0 ? "no requests" : statuses.map(([status, count]) => `${status} ${count}`).join(", ")}`,
  );
  const { accepted_prediction_tokens: accepted, rejected_prediction_tokens: rejected } = report.totals;
  if (accepted + rejected > 0) lines.push(`Prediction tokens: ${accepted} accepted, ${rejected} rejected (billed, counted in COMPLETION)`);
  if (report.deployments && report.deployments.data.length > 0) lines.push("", ...formatInstanceTime(report.deployments));
  return lines.join("\n");
}

/** Dedicated instance time, billed apart from the tokens above (requests to a deployment cost 0). */
function formatInstanceTime(usage: NonNullable<UsageReport["deployments"]>): string[] {
  const header = ["DEPLOYMENT", "MODEL ID", "INSTANCE SECONDS", "COST (USD)"];
  const rows = [
    ...usage.data.map((d) => [d.deployment_id, d.model_id, d.instance_seconds, d.cost_usd]),
    ["TOTAL", "", usage.instance_seconds, usage.cost_usd],
  ];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((cells) => cells[column]?.length ?? 0)));
  const render = (cells: string[]) =>
    cells
      .map((cell, column) => (column < 2 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)))
      .join("  ")
      .trimEnd();
  return ["Dedicated deployments (instance time):", render(header), ...rows.map(render)];
}
