/**
 * Key and account administration under /admin/v1, for operators and for the CLI while a server
 * holds the database: every account's keys, usage and standing. Behind the admin key (auth
 * "admin"), checked and throttled in the admin routes' own scope (http/routes/admin.ts); no key
 * calls these, so `run` gets no caller.
 */
import type { AccountAdmin } from "../../accounts/account-admin.js";
import { InvalidRequest } from "../../errors.js";
import { createKeyBody, listKeysQuery, patchKeyBody, type KeyLimitsBody } from "../../protocol/key-request.js";
import { listOf } from "../../protocol/list-page.js";
import { stringifyJson } from "../../protocol/money-json.js";
import { toWireUsageReport, type UsageReports } from "../../protocol/usage.js";
import { parseUsageParams, USAGE_QUERY } from "../../protocol/usage-request.js";
import { json, jsonText, type AdminEndpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";
import type { z } from "zod";

const keyId = [{ name: "id", description: "Key id." }];
const accountName = [{ name: "name", description: "Account name." }];

export const adminSpecs = {
  createKey: {
    method: "post",
    path: "/admin/v1/keys",
    id: "adminCreateKey",
    summary: "Create an API key (the key is shown once)",
    auth: "admin",
    body: createKeyBody,
    bodyOptional: true,
    response: { description: "The key and its id." },
    errors: [400, 401, 429],
  },
  listKeys: {
    method: "get",
    path: "/admin/v1/keys",
    id: "adminListKeys",
    summary: "List keys",
    auth: "admin",
    query: listKeysQuery,
    response: { description: "The keys (never their secrets)." },
    errors: [401, 429],
  },
  patchKey: {
    method: "patch",
    path: "/admin/v1/keys/{id}",
    id: "adminPatchKey",
    summary: "Change a key's limits and budget",
    auth: "admin",
    body: patchKeyBody,
    bodyOptional: true,
    pathParams: keyId,
    response: { description: "The key." },
    errors: [400, 401, 404, 429],
  },
  revokeKey: {
    method: "delete",
    path: "/admin/v1/keys/{id}",
    id: "adminRevokeKey",
    summary: "Revoke a key",
    auth: "admin",
    pathParams: keyId,
    response: { description: "The revoked key." },
    errors: [401, 404, 429],
  },
  usage: {
    method: "get",
    path: "/admin/v1/usage",
    id: "adminUsage",
    summary: "An account's usage",
    auth: "admin",
    query: [{ name: "account", description: "Account name (required)." }, ...USAGE_QUERY],
    response: { description: "Totals and groups." },
    errors: [400, 401, 404, 429],
  },
  disable: {
    method: "post",
    path: "/admin/v1/accounts/{name}/disable",
    id: "adminDisableAccount",
    summary: "Disable an account: its keys stop working and its deployments' instances stop (billed up to now)",
    auth: "admin",
    pathParams: accountName,
    response: { description: "The account." },
    errors: [401, 404, 429],
  },
  enable: {
    method: "post",
    path: "/admin/v1/accounts/{name}/enable",
    id: "adminEnableAccount",
    summary: "Enable an account",
    auth: "admin",
    pathParams: accountName,
    response: { description: "The account." },
    errors: [401, 404, 429],
  },
} satisfies Record<string, EndpointSpec & { auth: "admin" }>;

type UsageQuery = ReturnType<typeof parseUsageParams> & { account: string };

export function adminEndpoints(admin: AccountAdmin, usage: UsageReports): AdminEndpoint[] {
  return [...keyEndpoints(admin), ...accountEndpoints(admin, usage)];
}

function keyEndpoints(admin: AccountAdmin): AdminEndpoint[] {
  const createKey: AdminEndpoint<EndpointInput<unknown, unknown, z.infer<typeof createKeyBody>>> = {
    ...adminSpecs.createKey,
    run: async (_, { body }) => json(await admin.createKey(body.account, body), 201),
  };
  const listKeys: AdminEndpoint<EndpointInput<unknown, z.infer<typeof listKeysQuery>>> = {
    ...adminSpecs.listKeys,
    run: async (_, { query }) => json(listOf(await admin.listKeys({ account: query.account || undefined }))),
  };
  /** Changes a key's rpm_limit, tpm_limit and budget_usd: a value sets, null clears, an absent field stays. */
  const patchKey: AdminEndpoint<EndpointInput<{ id: string }, unknown, KeyLimitsBody>> = {
    ...adminSpecs.patchKey,
    run: async (_, { params, body }) => json(await admin.setKeyLimits(params.id, body)),
  };
  const revokeKey: AdminEndpoint<EndpointInput<{ id: string }>> = {
    ...adminSpecs.revokeKey,
    run: async (_, { params }) => json(await admin.revokeKey(params.id)),
  };
  return [createKey, listKeys, patchKey, revokeKey];
}

function accountEndpoints(admin: AccountAdmin, usage: UsageReports): AdminEndpoint[] {
  /** Any account's usage, in the same shape as GET /v1/usage (plus the account name). */
  const accountUsage: AdminEndpoint<EndpointInput<unknown, UsageQuery>> = {
    ...adminSpecs.usage,
    parseQuery: parseUsageQuery,
    async run(_, { query }) {
      const { account, ...params } = query;
      const found = await admin.findAccount(account);
      const report = await usage.ofAccount(found.id, params);
      return jsonText(stringifyJson(toWireUsageReport(report, { ...params, account: found.name })));
    },
  };
  const standing = (spec: typeof adminSpecs.disable, disabled: boolean): AdminEndpoint<EndpointInput<{ name: string }>> => ({
    ...spec,
    run: async (_, { params }) => json(await admin.setAccountDisabled(params.name, disabled)),
  });
  return [accountUsage, standing(adminSpecs.disable, true), standing(adminSpecs.enable, false)];
}

/** The account is required (a 400 naming it before anything else is read); the rest as GET /v1/usage takes it. */
function parseUsageQuery(raw: Record<string, unknown>): UsageQuery {
  const account = raw.account;
  if (typeof account !== "string" || account.trim() === "") throw new InvalidRequest("Missing required parameter: 'account'.", "account");
  return { ...parseUsageParams(raw), account: account.trim() };
}
