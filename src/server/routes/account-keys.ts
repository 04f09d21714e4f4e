import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { toWireCreatedKey, toWireKey, type WireRevokedKey } from "../../accounts/admin-wire.js";
import { createKey, listKeys, revokeKey } from "../../accounts/store.js";
import { Forbidden, InvalidRequest, NotFound } from "../../errors.js";
import type { Database } from "../../storage/database.js";
import { callerOf, type ApiCaller } from "../auth.js";
import { newKeyFields, parse, toCreateKeyInput } from "./key-input.js";

/** Strict: a body naming an `account` (or anything unknown) is a 400, never quietly another account. */
export const accountCreateKeyBody = z.strictObject(newKeyFields());

/**
 * The account-scoped key API: a key created with the manage-keys right lists, creates and revokes
 * the keys of its own account, and only those. Every other key gets 403. The admin API
 * (/admin/v1/keys) stays the operator's way to manage any account.
 */
export function accountKeyRoutes(app: FastifyInstance, db: Database): void {
  app.get("/v1/keys", async (request) => {
    const caller = keyManager(request);
    const keys = await listKeys(db, { account: caller.accountName });
    return { object: "list", data: keys.map(toWireKey) };
  });

  app.post("/v1/keys", async (request, reply) => {
    const caller = keyManager(request);
    const body = parse(accountCreateKeyBody, request.body ?? {});
    const created = await createKey(db, {
      ...toCreateKeyInput(caller.accountName, body),
      allowedModels: allowedModelsFor(caller, body.allowed_models ?? undefined),
    });
    return reply.code(201).send(toWireCreatedKey(created));
  });

  app.delete<{ Params: { id: string } }>("/v1/keys/:id", async (request): Promise<WireRevokedKey> => {
    const caller = keyManager(request);
    // Another account's key id reads exactly like an unknown one.
    if (!(await revokeKey(db, request.params.id, { accountId: caller.accountId }))) throw new NotFound(`No API key with id '${request.params.id}'.`);
    return { id: request.params.id, object: "api_key", revoked: true };
  });
}

function keyManager(request: Parameters<typeof callerOf>[0]): ApiCaller {
  const caller = callerOf(request);
  if (!caller.manageKeys) {
    throw new Forbidden("This API key cannot manage keys. Use a key of this account created with the manage-keys right.", "missing_manage_keys_right");
  }
  return caller;
}

/**
 * A key restricted to some models cannot mint a key for more: the new key gets the creator's list
 * when it names none, and a list naming a model outside it is a 400.
 */
function allowedModelsFor(caller: ApiCaller, requested: string[] | undefined): string[] | undefined {
  const own = caller.allowedModels;
  if (own === null) return requested;
  if (requested === undefined) return own;
  const outside = requested.map((model) => model.trim()).filter((model) => model !== "" && !own.includes(model));
  if (outside.length > 0) {
    throw new InvalidRequest(`This key may only grant the models it can use itself; not: ${outside.join(", ")}.`, "allowed_models");
  }
  return requested;
}
