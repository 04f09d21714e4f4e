import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AccountAdmin } from "../../accounts/account-admin.js";
import { createKeyBody, listKeysQuery, patchKeyBody } from "../../protocol/key-request.js";
import { toWireUsageReport, type UsageReports } from "../../protocol/usage.js";
import { parseUsageParams } from "../../protocol/usage-request.js";
import { stringifyJson } from "../../protocol/money-json.js";
import { InvalidRequest, RateLimited, Unauthorized } from "../../errors.js";
import { AdminThrottle, type AdminThrottleOptions } from "../admin-throttle.js";
import { parse } from "../parse-input.js";

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
  app.post("/admin/v1/keys", async (request, reply) => {
    const body = parse(createKeyBody, request.body ?? {});
    return reply.code(201).send(await admin.createKey(body.account, body));
  });

  /** Changes a key's rpm_limit, tpm_limit and budget_usd: a value sets, null clears, an absent field stays. */
  app.patch<{ Params: { id: string } }>("/admin/v1/keys/:id", async (request) =>
    admin.setKeyLimits(request.params.id, parse(patchKeyBody, request.body ?? {})),
  );

  app.get("/admin/v1/keys", async (request) => {
    const query = parse(listKeysQuery, request.query ?? {});
    return { object: "list", data: await admin.listKeys({ account: query.account || undefined }) };
  });

  app.delete<{ Params: { id: string } }>("/admin/v1/keys/:id", async (request) => admin.revokeKey(request.params.id));
}

function adminAccountRoutes(app: FastifyInstance, { admin, usage }: AdminRoutesOptions): void {
  /** Any account's usage, in the same shape as GET /v1/usage (plus the account name). */
  app.get("/admin/v1/usage", async (request, reply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    const account = query.account;
    if (typeof account !== "string" || account.trim() === "") throw new InvalidRequest("Missing required parameter: 'account'.", "account");
    const params = parseUsageParams(query);
    const found = await admin.findAccount(account.trim());
    const report = await usage.ofAccount(found.id, params);
    return reply.type("application/json; charset=utf-8").send(stringifyJson(toWireUsageReport(report, { ...params, account: found.name })));
  });

  for (const [action, disabled] of [
    ["disable", true],
    ["enable", false],
  ] as const) {
    app.post<{ Params: { name: string } }>(`/admin/v1/accounts/:name/${action}`, async (request) =>
      admin.setAccountDisabled(request.params.name, disabled),
    );
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
