import { z } from "zod";

/**
 * Request bodies of the admin key API (/admin/v1/keys) and the account-scoped one (/v1/keys), so
 * both accept the same fields and answer with the same messages. Ranges are checked by the store,
 * as for the CLI.
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

/** `POST /admin/v1/keys`: a new key of any account. */
export const createKeyBody = z.object({ account: z.string().min(1), ...newKeyFields() });

/** `PATCH /admin/v1/keys/{id}`: only the limits may change; an unknown field is a 400 rather than silently ignored. */
export const patchKeyBody = z.strictObject(keyLimitFields());
export type KeyLimitsBody = z.infer<typeof patchKeyBody>;

/** `GET /admin/v1/keys`. */
export const listKeysQuery = z.object({ account: z.string().optional() });

/** `POST /v1/keys`. Strict: a body naming an `account` (or anything unknown) is a 400, never quietly another account. */
export const accountCreateKeyBody = z.strictObject(newKeyFields());
