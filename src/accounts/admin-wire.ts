import type { Account, CreatedKey, KeyInfo } from "./key-store.js";

/**
 * The admin API's JSON shapes, in the OpenAI style (snake_case, unix-second timestamps). Shared by
 * the routes that produce them and the CLI that reads them back, so both sides agree by construction.
 */
export interface WireKey {
  object: "api_key";
  id: string;
  account: string;
  name: string | null;
  prefix: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  last_used_at: number | null;
  allowed_models: string[] | null;
  /** null: the server default applies. */
  rpm_limit: number | null;
  /** null: the server default applies. */
  tpm_limit: number | null;
  /**
   * US dollars as an exact decimal *string* ("25.5"), null for no budget. Strings, so no JSON
   * reader turns money into a float on the way.
   */
  budget_usd: string | null;
  /** US dollars settled against the key so far, exact decimal string. */
  spent_usd: string;
  /** The key may list, create and revoke its own account's keys (GET/POST/DELETE /v1/keys). */
  manage_keys: boolean;
  /** The key may create, scale and delete its own account's deployments (POST/PATCH/DELETE /v1/deployments). */
  manage_deployments: boolean;
}

export interface WireCreatedKey extends WireKey {
  key: string;
}

export interface WireAccount {
  object: "account";
  id: string;
  name: string;
  disabled: boolean;
  created_at: number;
}

export interface WireRevokedKey {
  id: string;
  object: "api_key";
  revoked: true;
}

export function toWireKey(info: KeyInfo): WireKey {
  return {
    object: "api_key",
    id: info.id,
    account: info.account,
    name: info.name,
    prefix: info.prefix,
    created_at: toUnixSeconds(info.createdAt),
    expires_at: info.expiresAt ? toUnixSeconds(info.expiresAt) : null,
    revoked_at: info.revokedAt ? toUnixSeconds(info.revokedAt) : null,
    last_used_at: info.lastUsedAt ? toUnixSeconds(info.lastUsedAt) : null,
    allowed_models: info.allowedModels,
    rpm_limit: info.requestsPerMinute,
    tpm_limit: info.tokensPerMinute,
    budget_usd: info.budgetUsd,
    spent_usd: info.spentUsd,
    manage_keys: info.manageKeys,
    manage_deployments: info.manageDeployments,
  };
}

export function toWireCreatedKey(created: CreatedKey): WireCreatedKey {
  return { ...toWireKey(created), key: created.key };
}

export function toWireAccount(account: Account): WireAccount {
  return {
    object: "account",
    id: account.id,
    name: account.name,
    disabled: account.disabled,
    created_at: toUnixSeconds(account.createdAt),
  };
}

export function fromWireKey(wire: WireKey): KeyInfo {
  return {
    id: wire.id,
    account: wire.account,
    name: wire.name,
    prefix: wire.prefix,
    createdAt: fromUnixSeconds(wire.created_at),
    expiresAt: wire.expires_at === null ? null : fromUnixSeconds(wire.expires_at),
    revokedAt: wire.revoked_at === null ? null : fromUnixSeconds(wire.revoked_at),
    lastUsedAt: wire.last_used_at === null ? null : fromUnixSeconds(wire.last_used_at),
    allowedModels: wire.allowed_models,
    requestsPerMinute: wire.rpm_limit ?? null,
    tokensPerMinute: wire.tpm_limit ?? null,
    budgetUsd: wire.budget_usd ?? null,
    spentUsd: wire.spent_usd ?? "0",
    // A server from before the right existed sends no field: its keys have no such right.
    manageKeys: wire.manage_keys === true,
    manageDeployments: wire.manage_deployments === true,
  };
}

export function fromWireCreatedKey(wire: WireCreatedKey): CreatedKey {
  return { ...fromWireKey(wire), key: wire.key };
}

function toUnixSeconds(date: Date): number {
  return Math.floor(date.getTime() / 1000);
}

function fromUnixSeconds(seconds: number): Date {
  return new Date(seconds * 1000);
}
