/**
 * The account-scoped key API: a key created with the manage-keys right lists, creates and revokes
 * the keys of its own account, and only those (accounts/account-keys.ts bounds what it may grant
 * and revoke by its own rights). Every other key gets 403.
 */
import type { AccountKeys } from "../../accounts/account-keys.js";
import { Forbidden } from "../../errors.js";
import { accountCreateKeyBody, type NewKeyBody } from "../../protocol/key-request.js";
import { listOf } from "../../protocol/list-page.js";
import type { Principal } from "../../protocol/principal.js";
import { json, type Endpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";

export const keySpecs = {
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
    bodyOptional: true,
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
} satisfies Record<string, EndpointSpec>;

export function keyEndpoints(keys: AccountKeys): Endpoint[] {
  const authorize = mayManageKeys;
  const list: Endpoint = {
    ...keySpecs.list,
    authorize,
    run: async (caller) => json(listOf(await keys.list(caller))),
  };
  const create: Endpoint<EndpointInput<unknown, unknown, NewKeyBody>> = {
    ...keySpecs.create,
    authorize,
    run: async (caller, { body }) => json(await keys.create(caller, body), 201),
  };
  const revoke: Endpoint<EndpointInput<{ id: string }>> = {
    ...keySpecs.revoke,
    authorize,
    run: async (caller, { params }) => json(await keys.revoke(caller, params.id)),
  };
  return [list, create, revoke];
}

function mayManageKeys(caller: Principal): void {
  if (!caller.manageKeys) {
    throw new Forbidden(
      "This API key cannot manage keys. Use a key of this account created with the manage-keys right.",
      "missing_manage_keys_right",
    );
  }
}
