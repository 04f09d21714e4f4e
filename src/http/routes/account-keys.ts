import type { FastifyInstance } from "fastify";
import type { AccountKeys } from "../../accounts/account-keys.js";
import { Forbidden } from "../../errors.js";
import { accountCreateKeyBody } from "../../protocol/key-request.js";
import type { Principal } from "../../protocol/principal.js";
import { callerOf } from "../auth.js";
import { parse } from "../parse-input.js";
import { route, type RouteSpec } from "../route-spec.js";

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const accountKeyOperations = {
  list: {
    method: "get",
    path: "/v1/keys",
    id: "listAccountKeys",
    summary: "The caller's account's keys (needs the manage-keys right)",
    auth: "key",
    response: { description: "The keys (never their secrets)." },
    errors: [401, 403],
  },
  create: {
    method: "post",
    path: "/v1/keys",
    id: "createAccountKey",
    summary:
      "Create a key in the caller's account (needs the manage-keys right; shown once). It gets at most the caller's rights: omitted fields inherit the caller's models, limits, expiry and remaining budget; asking for more is a 403 exceeds_own_rights naming the field",
    auth: "key",
    body: accountCreateKeyBody,
    response: { description: "The key and its id." },
    errors: [400, 401, 403],
  },
  revoke: {
    method: "delete",
    path: "/v1/keys/{id}",
    id: "revokeAccountKey",
    summary:
      "Revoke a key of the caller's account (needs the manage-keys right; only a key whose rights are within the caller's, else 403 exceeds_own_rights)",
    auth: "key",
    pathParams: [{ name: "id", description: "Key id." }],
    response: { description: "The revoked key." },
    errors: [401, 403, 404],
  },
} satisfies Record<string, RouteSpec>;

/**
 * The account-scoped key API: a key created with the manage-keys right lists, creates and revokes
 * the keys of its own account, and only those (accounts/account-keys.ts bounds what it may grant
 * and revoke by its own rights). Every other key gets 403.
 */
export function accountKeyRoutes(app: FastifyInstance, keys: AccountKeys): void {
  route(app, accountKeyOperations.list, async (request) => ({ object: "list", data: await keys.list(keyManager(request)) }));

  route(app, accountKeyOperations.create, async (request, reply) => {
    const caller = keyManager(request);
    const body = parse(accountCreateKeyBody, request.body ?? {});
    return reply.code(201).send(await keys.create(caller, body));
  });

  route<{ Params: { id: string } }>(app, accountKeyOperations.revoke, async (request) =>
    keys.revoke(keyManager(request), request.params.id),
  );
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
