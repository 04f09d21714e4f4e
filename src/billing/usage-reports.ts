import type { ReportRange, UsageReports } from "../protocol/usage.js";
import type { Database } from "../storage/database.js";
import { queryAccountUsage } from "./instance-usage.js";
import type { UsageLedger } from "./ports.js";

/**
 * Usage reports read from the ledger, for the API (the user's own account, or any account for the
 * admin). They first wait for this process's rows still being written (`UsageLedger.settled`), so a
 * client sees every request it has had an answer to.
 */
export function createUsageReports(db: Database, ledger?: Pick<UsageLedger, "settled">): UsageReports {
  return {
    async ofAccount(accountId: string, range: ReportRange) {
      await ledger?.settled();
      return queryAccountUsage(db, { accountId, ...range });
    },
  };
}
