import type { WireAccount, WireCreatedKey, WireKey } from "../protocol/keys-response.js";
import type { Account, CreatedKey, KeyInfo } from "./key-store.js";

/**
 * Key and account objects built from their rows and read back (the CLI); their shapes are declared
 * in protocol/keys-response.ts, where the console reads them too.
 */
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
