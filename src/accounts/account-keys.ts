import { Forbidden, NotFound } from "../errors.js";
import { remainingBudget } from "../billing/budgets.js";
import type { Principal } from "../protocol/principal.js";
import type { NewKeyBody } from "../protocol/key-request.js";
import type { Database } from "../storage/database.js";
import type { WireCreatedKey, WireKey, WireRevokedKey } from "../protocol/keys-response.js";
import { toWireCreatedKey, toWireKey } from "./admin-wire.js";
import { toCreateKeyInput } from "./key-body.js";
import { exceededRight, type KeyRights } from "./key-rights.js";
import { loadKeyStanding, rightsOf, UNLIMITED_RATES, type KeyStanding, type RateDefaults } from "./key-standing.js";
import { createKey, listKeys, optionalBudget, revokeKey, type CreateKeyInput } from "./key-store.js";

/**
 * The account-scoped key API (/v1/keys), for a caller holding the manage-keys right (the route
 * checks it): the keys of its own account, and only those. A key it creates gets at most its own
 * rights, and it may revoke only keys whose rights are within its own. The admin API
 * (account-admin.ts) stays the operator's way to manage any account, without those bounds.
 */
export interface AccountKeys {
  list(caller: Principal): Promise<WireKey[]>;
  /** Omitted fields inherit the caller's models, limits, expiry and remaining budget; more than its own is 403 exceeds_own_rights. */
  create(caller: Principal, body: NewKeyBody): Promise<WireCreatedKey>;
  /** Another account's key id reads exactly like an unknown one (404). */
  revoke(caller: Principal, id: string): Promise<WireRevokedKey>;
}

/**
 * `rateDefaults` are the server's per-key rate limits for keys that set none: rights are weighed with
 * them. `spendSettled` is awaited before keys' spend is read: the ledger's rows of requests already
 * answered (UsageLedger.settled), so a listing holds every answer its caller has had.
 */
export function createAccountKeys(
  db: Database,
  rateDefaults: RateDefaults = UNLIMITED_RATES,
  spendSettled: () => Promise<void> = async () => {},
): AccountKeys {
  return {
    async list(caller) {
      await spendSettled();
      return (await listKeys(db, { account: caller.accountName })).map(toWireKey);
    },
    async create(caller, body) {
      const creator = await ownStanding(db, caller);
      const input = withinCreator(toCreateKeyInput(caller.accountName, body), creator);
      const beyond = exceededRight(rightsOf(creator, rateDefaults, "left"), requestedRights(input, rateDefaults));
      if (beyond) {
        throw new Forbidden(
          `A key can give a new key at most its own rights; this one cannot grant ${beyond.message}.`,
          "exceeds_own_rights",
          beyond.param,
        );
      }
      return toWireCreatedKey(await createKey(db, input));
    },
    async revoke(caller, id) {
      const target = await loadKeyStanding(db, id, caller.accountId);
      if (!target) throw new NotFound(`No API key with id '${id}'.`);
      const own = rightsOf(await ownStanding(db, caller), rateDefaults, "ceiling");
      const beyond = exceededRight(own, rightsOf(target, rateDefaults, "ceiling"));
      if (beyond) {
        throw new Forbidden(
          `A key can revoke only keys with no more rights than its own; key '${id}' has ${beyond.message}.`,
          "exceeds_own_rights",
          beyond.param,
        );
      }
      if (!(await revokeKey(db, id, { accountId: caller.accountId }))) throw new NotFound(`No API key with id '${id}'.`);
      return { id, object: "api_key", revoked: true };
    },
  };
}

async function ownStanding(db: Database, caller: Principal): Promise<KeyStanding> {
  const standing = await loadKeyStanding(db, caller.keyId, caller.accountId);
  // Authentication found this key a moment ago; only a concurrent deletion could get here.
  if (!standing) throw new NotFound(`No API key with id '${caller.keyId}'.`);
  return standing;
}

/**
 * What the new key gets where the request names nothing: the creator's own models, rate limits and
 * expiry, and what is left of its budget. Named values are kept as given, for the rights check.
 */
function withinCreator(input: CreateKeyInput, creator: KeyStanding): CreateKeyInput {
  const left = creator.budgetUsd === null ? null : remainingBudget(creator.budgetUsd, creator.spentUsd, creator.reservedUsd);
  return {
    ...input,
    allowedModels: input.allowedModels ?? creator.allowedModels ?? undefined,
    requestsPerMinute: input.requestsPerMinute ?? creator.requestsPerMinute,
    tokensPerMinute: input.tokensPerMinute ?? creator.tokensPerMinute,
    // Validated here already: the rights check compares it as money.
    budgetUsd: optionalBudget(input.budgetUsd) ?? left,
    expiresAt: input.expiresAt ?? creator.expiresAt ?? undefined,
  };
}

function requestedRights(input: CreateKeyInput, rateDefaults: RateDefaults): KeyRights {
  return {
    manageKeys: input.manageKeys === true,
    manageDeployments: input.manageDeployments === true,
    allowedModels: input.allowedModels?.map((model) => model.trim()).filter((model) => model !== "") ?? null,
    budgetUsd: input.budgetUsd ?? null,
    requestsPerMinute: input.requestsPerMinute ?? rateDefaults.requestsPerMinute,
    tokensPerMinute: input.tokensPerMinute ?? rateDefaults.tokensPerMinute,
    expiresAt: input.expiresAt ?? null,
  };
}
