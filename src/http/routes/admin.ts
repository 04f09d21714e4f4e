import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AccountAdmin } from "../../accounts/account-admin.js";
import { createKeyBody, listKeysQuery, patchKeyBody } from "../../protocol/key-request.js";
import { toWireUsageReport, type UsageReports } from "../../protocol/usage.js";
import { parseUsageParams, USAGE_QUERY } from "../../protocol/usage-request.js";
import { stringifyJson } from "../../protocol/money-json.js";
import { InvalidRequest, RateLimited, Unauthorized } from "../../errors.js";
import { AdminThrottle, type AdminThrottleOptions } from "../admin-throttle.js";
import { parse } from "../../protocol/parse-input.js";
import { route, type RouteSpec } from "../route-spec.js";

const keyId = [{ name: "id", description: "Key id." }];
const accountName = [{ name: "name", description: "Account name." }];

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const adminOperations = {
  createKey: {
    method: "post",
    path: "/admin/v1/keys",
    id: "adminCreateKey",
    summary: "Create an API key (the key is shown once)",
    auth: "admin",
    body: createKeyBody,
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
} satisfies Record<string, RouteSpec>;

export interface AdminRoutesOptions {
  /** Keys and accounts of every account (accounts/account-admin.ts). */
  admin: AccountAdmin;
  /** Any account's usage (billing/usage-reports.ts). */
  usage: UsageReports;
  /** The token in force for this server: SWITCHYARD_ADMIN_KEY, or the one written to server.json. */
  adminToken: string;
  /** Failed admin-key attempts allowed per client IP before it is locked out (default 10 a minute). */
  throttle?: AdminThrottleOptions;
}

/**
 * Key and account administration under /admin/v1, for operators and for the CLI while a server
 * holds the database. Registered as its own encapsulated plugin, so its auth hook guards exactly
 * these routes.
 */
export async function adminRoutes(app: FastifyInstance, opts: AdminRoutesOptions): Promise<void> {
  if (!opts.adminToken) throw new Error("adminRoutes needs a non-empty admin token.");
  requireAdminToken(app, opts);
  adminKeyRoutes(app, opts.admin);
  adminAccountRoutes(app, opts);
}

/** Every admin route needs the admin token; an address that keeps guessing is locked out for a while. */
function requireAdminToken(app: FastifyInstance, opts: AdminRoutesOptions): void {
  const expectedTokenHash = sha256(opts.adminToken);
  const throttle = new AdminThrottle(opts.throttle);
  app.addHook("onRequest", async (request) => {
    // A locked-out address is refused before its token is even looked at: no more guesses.
    const lockedMs = throttle.lockedFor(request.ip);
    if (lockedMs > 0) {
      throw new RateLimited(
        `Too many failed admin-key attempts from this address; try again in ${Math.ceil(lockedMs / 1000)} s.`,
        lockedMs / 1000,
        "admin_auth_throttled",
      );
    }
    if (!hasAdminToken(request, expectedTokenHash)) {
      throttle.failed(request.ip);
      throw new Unauthorized("Invalid or missing admin token. Send 'Authorization: Bearer <ADMIN_KEY>'.");
    }
    throttle.succeeded(request.ip);
  });
}

function adminKeyRoutes(app: FastifyInstance, admin: AccountAdmin): void {
  route(app, adminOperations.createKey, async (request, reply) => {
    const body = parse(createKeyBody, request.body ?? {});
    return reply.code(201).send(await admin.createKey(body.account, body));
  });

  /** Changes a key's rpm_limit, tpm_limit and budget_usd: a value sets, null clears, an absent field stays. */
  route<{ Params: { id: string } }>(app, adminOperations.patchKey, async (request) =>
    admin.setKeyLimits(request.params.id, parse(patchKeyBody, request.body ?? {})),
  );

  route(app, adminOperations.listKeys, async (request) => {
    const query = parse(listKeysQuery, request.query ?? {});
    return { object: "list", data: await admin.listKeys({ account: query.account || undefined }) };
  });

  route<{ Params: { id: string } }>(app, adminOperations.revokeKey, async (request) => admin.revokeKey(request.params.id));
}

function adminAccountRoutes(app: FastifyInstance, { admin, usage }: AdminRoutesOptions): void {
  /** Any account's usage, in the same shape as GET /v1/usage (plus the account name). */
  route(app, adminOperations.usage, async (request, reply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    const account = query.account;
    if (typeof account !== "string" || account.trim() === "") throw new InvalidRequest("Missing required parameter: 'account'.", "account");
    const params = parseUsageParams(query);
    const found = await admin.findAccount(account.trim());
    const report = await usage.ofAccount(found.id, params);
    return reply.type("application/json; charset=utf-8").send(stringifyJson(toWireUsageReport(report, { ...params, account: found.name })));
  });

  for (const [op, disabled] of [
    [adminOperations.disable, true],
    [adminOperations.enable, false],
  ] as const) {
    route<{ Params: { name: string } }>(app, op, async (request) => admin.setAccountDisabled(request.params.name, disabled));
  }
}

/** Hashing both sides first gives equal-length buffers, so timingSafeEqual never leaks the length. */
function hasAdminToken(request: FastifyRequest, expectedTokenHash: Buffer): boolean {
  const header = request.headers.authorization;
  const match = typeof header === "string" ? /^Bearer\s+(.+)$/i.exec(header.trim()) : null;
  if (!match?.[1]) return false;
  return timingSafeEqual(sha256(match[1]), expectedTokenHash);
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}
