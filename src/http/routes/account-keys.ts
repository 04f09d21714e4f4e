import type { FastifyInstance } from "fastify";
import type { AccountKeys } from "../../accounts/account-keys.js";
import { Forbidden } from "../../errors.js";
import { accountCreateKeyBody } from "../../protocol/key-request.js";
import type { Principal } from "../../protocol/principal.js";
import { callerOf } from "../auth.js";
import { parse } from "../parse-input.js";

/**
 * The account-scoped key API: a key created with the manage-keys right lists, creates and revokes
 * the keys of its own account, and only those (accounts/account-keys.ts bounds what it may grant
 * and revoke by its own rights). Every other key gets 403.
 */
export function accountKeyRoutes(app: FastifyInstance, keys: AccountKeys): void {
  app.get("/v1/keys", async (request) => ({ object: "list", data: await keys.list(keyManager(request)) }));

  app.post("/v1/keys", async (request, reply) => {
    const caller = keyManager(request);
    const body = parse(accountCreateKeyBody, request.body ?? {});
    return reply.code(201).send(await keys.create(caller, body));
  });

  app.delete<{ Params: { id: string } }>("/v1/keys/:id", async (request) => keys.revoke(keyManager(request), request.params.id));
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
