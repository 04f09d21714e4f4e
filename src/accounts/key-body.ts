import { InvalidRequest } from "../errors.js";
import type { NewKeyBody } from "../protocol/key-request.js";
import type { CreateKeyInput } from "./key-store.js";

/** A parsed key body (protocol/key-request.ts) as the store's input, for `account`. */
export function toCreateKeyInput(account: string, body: NewKeyBody): CreateKeyInput {
  return {
    account,
    name: body.name ?? undefined,
    expiresAt: body.expires_at == null ? undefined : parseExpiry(body.expires_at),
    allowedModels: body.allowed_models ?? undefined,
    requestsPerMinute: body.rpm_limit ?? undefined,
    tokensPerMinute: body.tpm_limit ?? undefined,
    budgetUsd: budgetText(body.budget_usd) ?? undefined,
    manageKeys: body.manage_keys ?? undefined,
    manageDeployments: body.manage_deployments ?? undefined,
  };
}

/** undefined and null pass through; a JSON number becomes its shortest text, which the store then validates. */
export function budgetText(value: string | number | null | undefined): string | null | undefined {
  return typeof value === "number" ? String(value) : value;
}

export function parseExpiry(value: number | string): Date {
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(date.getTime())) throw new InvalidRequest("expires_at must be unix seconds or an ISO 8601 date.", "expires_at");
  if (date.getTime() <= Date.now()) throw new InvalidRequest("expires_at must be in the future.", "expires_at");
  return date;
}
