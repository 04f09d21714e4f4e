import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { toWireCreatedKey, toWireKey, type WireRevokedKey } from "../../accounts/admin-wire.js";
import { exceededRight, type KeyRights } from "../../accounts/key-rights.js";
import { loadKeyStanding, rightsOf, UNLIMITED_RATES, type KeyStanding, type RateDefaults } from "../../accounts/key-standing.js";
import { createKey, listKeys, optionalBudget, revokeKey, type CreateKeyInput } from "../../accounts/key-store.js";
import { remainingBudget } from "../../billing/budgets.js";
import { Forbidden, NotFound } from "../../errors.js";
import type { Database } from "../../storage/database.js";
import { callerOf } from "../auth.js";
import type { Principal } from "../../protocol/principal.js";
import { newKeyFields, parse, toCreateKeyInput } from "./key-input.js";

/** Strict: a body naming an `account` (or anything unknown) is a 400, never quietly another account. */
export const accountCreateKeyBody = z.strictObject(newKeyFields());

/**
 * The account-scoped key API: a key created with the manage-keys right lists, creates and revokes
 * the keys of its own account, and only those. Every other key gets 403. A key it creates gets at
 * most its own rights, and it may revoke only keys whose rights are within its own. The admin API
 * (/admin/v1/keys) stays the operator's way to manage any account, without those bounds.
 * `rateDefaults` are the server's per-key rate limits for keys that set none.
 */
export function accountKeyRoutes(app: FastifyInstance, db: Database, rateDefaults: RateDefaults = UNLIMITED_RATES): void {
  app.get("/v1/keys", async (request) => {
    const caller = keyManager(request);
    const keys = await listKeys(db, { account: caller.accountName });
    return { object: "list", data: keys.map(toWireKey) };
  });

  app.post("/v1/keys", async (request, reply) => {
    const caller = keyManager(request);
    const body = parse(accountCreateKeyBody, request.body ?? {});
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
    const created = await createKey(db, input);
    return reply.code(201).send(toWireCreatedKey(created));
  });

  app.delete<{ Params: { id: string } }>("/v1/keys/:id", async (request): Promise<WireRevokedKey> => {
    const caller = keyManager(request);
    const id = request.params.id;
    // Another account's key id reads exactly like an unknown one.
    const target = await loadKeyStanding(db, id, caller.accountId);
    if (!target) throw new NotFound(`No API key with id '${id}'.`);
    const beyond = exceededRight(
      rightsOf(await ownStanding(db, caller), rateDefaults, "ceiling"),
      rightsOf(target, rateDefaults, "ceiling"),
    );
    if (beyond) {
      throw new Forbidden(
        `A key can revoke only keys with no more rights than its own; key '${id}' has ${beyond.message}.`,
        "exceeds_own_rights",
        beyond.param,
      );
    }
    if (!(await revokeKey(db, id, { accountId: caller.accountId }))) throw new NotFound(`No API key with id '${id}'.`);
    return { id, object: "api_key", revoked: true };
  });
}

function keyManager(request: Parameters<typeof callerOf>[0]): Principal {
  const caller = callerOf(request);
  if (!caller.manageKeys) {
    throw new Forbidden(
      "This API key cannot manage keys. Use a key of this account created with the manage-keys right.",
      "missing_manage_keys_right",
    );
  }
  return caller;
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
