import type { SpendBudgets, UsageLedger } from "../billing/ports.js";
import type { RequestLimits } from "../limits/ports.js";

/**
 * Metering ports for a worker (`serve --worker`): the gateway in front of it keeps the ledger,
 * limits and budgets, so the worker records nothing and refuses nothing on their account.
 */
export const UNMETERED: { ledger: UsageLedger; limits: RequestLimits; budgets: SpendBudgets } = {
  ledger: { record: async () => {}, markUndelivered: async () => {}, settled: async () => {} },
  limits: { admit: async () => ({ release: async () => {} }) },
  budgets: { reserve: async () => null },
};
