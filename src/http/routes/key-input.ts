import { z } from "zod";
import type { CreateKeyInput } from "../../accounts/key-store.js";
import { InvalidRequest } from "../../errors.js";

/**
 * Request bodies shared by the admin key API and the account-scoped one, so both accept the same
 * fields and answer with the same messages. Ranges are checked by the store, as for the CLI.
 */
export function keyLimitFields() {
  return {
    rpm_limit: z.number().nullish(),
    tpm_limit: z.number().nullish(),
    /** A decimal string ("25.50"); a JSON number is taken as its shortest text. */
    budget_usd: z.union([z.string(), z.number()]).nullish(),
  };
}

/** Everything a new key may be given, apart from the account it belongs to. */
export function newKeyFields() {
  return {
    name: z.string().nullish(),
    /** Unix seconds or an ISO 8601 date. */
    expires_at: z.union([z.number().positive(), z.string().min(1)]).nullish(),
    allowed_models: z.array(z.string()).nullish(),
    manage_keys: z.boolean().nullish(),
    manage_deployments: z.boolean().nullish(),
    ...keyLimitFields(),
  };
}

const newKeyBody = z.object(newKeyFields());
export type NewKeyBody = z.infer<typeof newKeyBody>;

/** A parsed body as the store's input, for `account`. */
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

/** Validates input against its schema; the first problem is a 400 naming its `param`, with the code chat completions give it. */
export function parse<T>(schema: z.ZodType<T>, input: unknown): T {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const param = issue && issue.path.length > 0 ? issue.path.join(".") : null;
  const code = issue?.code === "invalid_type" || issue?.code === "invalid_union" ? "invalid_type" : "invalid_value";
  throw new InvalidRequest(
    param ? `Invalid '${param}': ${issue?.message}` : `Invalid request: ${issue?.message ?? "malformed"}`,
    param,
    code,
  );
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
