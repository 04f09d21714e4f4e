import { compareMoney } from "../billing/cost.js";

/**
 * What a key may do, as compared between two keys of one account. A key holding the manage-keys
 * right may create, and revoke, only keys whose rights are within its own: otherwise one leaked
 * low-budget key could mint itself an unlimited one, or revoke the account owner's.
 *
 * Every field is the *effective* value, so the comparison never has to know what null meant where
 * it came from: rate limits with the server default already applied, and null meaning none at all.
 */
export interface KeyRights {
  /** The key may list, create and revoke its account's keys. */
  manageKeys: boolean;
  /** The key may create, scale and delete its account's dedicated deployments. */
  manageDeployments: boolean;
  /** null: every model. */
  allowedModels: readonly string[] | null;
  /** Spend the comparison allows, exact decimal string; null: no budget. */
  budgetUsd: string | null;
  /** Effective requests per minute (the key's own, else the server default); null: unlimited. */
  requestsPerMinute: number | null;
  /** Effective tokens per minute; null: unlimited. */
  tokensPerMinute: number | null;
  /** null: never expires. */
  expiresAt: Date | null;
}

/** The boolean rights, with the API's name for each: granting one more right is one line here. */
export const BOOLEAN_RIGHTS: ReadonlyArray<{ field: BooleanRight; param: string; what: string }> = [
  { field: "manageKeys", param: "manage_keys", what: "the manage-keys right" },
  { field: "manageDeployments", param: "manage_deployments", what: "the manage-deployments right" },
];

type BooleanRight = { [K in keyof KeyRights]: KeyRights[K] extends boolean ? K : never }[keyof KeyRights];

/** Where one key's rights go beyond another's: the API field and a sentence for the error message. */
export interface ExceededRight {
  param: string;
  message: string;
}

/**
 * The first way `other` has more rights than `own`, or null when every right of `other` is within
 * `own` (equal rights count as within, so a key may always act on itself).
 */
export function exceededRight(own: KeyRights, other: KeyRights): ExceededRight | null {
  for (const right of BOOLEAN_RIGHTS) {
    if (other[right.field] && !own[right.field]) return { param: right.param, message: `${right.what}, which this key does not have` };
  }
  return (
    modelsBeyond(own.allowedModels, other.allowedModels) ??
    budgetBeyond(own.budgetUsd, other.budgetUsd) ??
    limitBeyond("rpm_limit", "requests per minute", own.requestsPerMinute, other.requestsPerMinute) ??
    limitBeyond("tpm_limit", "tokens per minute", own.tokensPerMinute, other.tokensPerMinute) ??
    expiryBeyond(own.expiresAt, other.expiresAt)
  );
}

function modelsBeyond(own: readonly string[] | null, other: readonly string[] | null): ExceededRight | null {
  if (own === null) return null;
  if (other === null) return { param: "allowed_models", message: `every model, where this key may use only ${own.join(", ")}` };
  const outside = other.filter((model) => !own.includes(model));
  return outside.length === 0 ? null : { param: "allowed_models", message: `models this key cannot use itself: ${outside.join(", ")}` };
}

function budgetBeyond(own: string | null, other: string | null): ExceededRight | null {
  if (own === null) return null;
  if (other === null) return { param: "budget_usd", message: `no spend budget, where this key has $${own}` };
  return compareMoney(other, own) > 0 ? { param: "budget_usd", message: `a budget of $${other}, more than this key's $${own}` } : null;
}

function limitBeyond(param: string, unit: string, own: number | null, other: number | null): ExceededRight | null {
  if (own === null) return null;
  if (other === null) return { param, message: `unlimited ${unit}, where this key has ${own}` };
  return other > own ? { param, message: `${other} ${unit}, more than this key's ${own}` } : null;
}

function expiryBeyond(own: Date | null, other: Date | null): ExceededRight | null {
  if (own === null) return null;
  if (other === null) return { param: "expires_at", message: `no expiry, where this key expires at ${own.toISOString()}` };
  return other.getTime() > own.getTime()
    ? { param: "expires_at", message: `an expiry of ${other.toISOString()}, later than this key's ${own.toISOString()}` }
    : null;
}
