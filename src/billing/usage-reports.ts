import type { ReportRange, UsageReports } from "../protocol/usage.js";
import type { Database } from "../storage/database.js";
import { queryAccountUsage } from "./instance-usage.js";

/** Usage reports read from the ledger, for the API (the user's own account, or any account for the admin). */
export function createUsageReports(db: Database): UsageReports {
  return { ofAccount: (accountId: string, range: ReportRange) => queryAccountUsage(db, { accountId, ...range }) };
}
