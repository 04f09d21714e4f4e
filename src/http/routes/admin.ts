import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { toWireAccount, toWireCreatedKey, toWireKey, type WireRevokedKey } from "../../accounts/admin-wire.js";
import { createKey, findAccount, listKeys, revokeKey, setAccountDisabled, setKeyLimits } from "../../accounts/key-store.js";
import { queryAccountUsage } from "../../billing/instance-usage.js";
import { toWireUsageReport } from "../../protocol/usage.js";
import { parseUsageParams } from "./usage.js";
import { stringifyJson } from "../../protocol/money-json.js";
import { InvalidRequest, NotFound, RateLimited, Unauthorized } from "../../errors.js";
import { AdminThrottle, type AdminThrottleOptions } from "../admin-throttle.js";
import { budgetText, keyLimitFields, newKeyFields, parse, toCreateKeyInput } from "./key-input.js";
import type { Database } from "../../storage/database.js";

export interface AdminRoutesOptions {
  db: Database;
  /** The token in force for this server: SWITCHYARD_ADMIN_KEY, or the one written to server.json. */
  adminToken: string;
  /** Failed admin-key attempts allowed per client IP before it is locked out (default 10 a minute). */
  throttle?: AdminThrottleOptions;
  /** An account was disabled: its deployments' instances stop at once (they bill nothing after). */
  onAccountDisabled?: (accountId: string) => Promise<void>;
}

export const createKeyBody = z.object({ account: z.string().min(1), ...newKeyFields() });

/** Only the limits may change; an unknown field is a 400 rather than silently ignored. */
export const patchKeyBody = z.strictObject(keyLimitFields());

export const listKeysQuery = z.object({ account: z.string().optional() });

/**
 * Key and account administration under /admin/v1, for operators and for the CLI while a server
 * holds the database. Registered as its own encapsulated plugin, so its auth hook guards exactly
 * these routes.
 */
export async function adminRoutes(app: FastifyInstance, opts: AdminRoutesOptions): Promise<void> {
  if (!opts.adminToken) throw new Error("adminRoutes needs a non-empty admin token.");
  requireAdminToken(app, opts);
  adminKeyRoutes(app, opts.db);
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

function adminKeyRoutes(app: FastifyInstance, db: Database): void {
  app.post("/admin/v1/keys", async (request, reply) => {
    const body = parse(createKeyBody, request.body ?? {});
    const created = await createKey(db, toCreateKeyInput(body.account, body));
    return reply.code(201).send(toWireCreatedKey(created));
  });

  /** Changes a key's rpm_limit, tpm_limit and budget_usd: a value sets, null clears, an absent field stays. */
  app.patch<{ Params: { id: string } }>("/admin/v1/keys/:id", async (request) => {
    const body = parse(patchKeyBody, request.body ?? {});
    const updated = await setKeyLimits(db, request.params.id, {
      requestsPerMinute: body.rpm_limit,
      tokensPerMinute: body.tpm_limit,
      budgetUsd: budgetText(body.budget_usd),
    });
    if (!updated) throw new NotFound(`No API key with id '${request.params.id}'.`);
    return toWireKey(updated);
  });

  app.get("/admin/v1/keys", async (request) => {
    const query = parse(listKeysQuery, request.query ?? {});
    const keys = await listKeys(db, { account: query.account || undefined });
    return { object: "list", data: keys.map(toWireKey) };
  });

  app.delete<{ Params: { id: string } }>("/admin/v1/keys/:id", async (request): Promise<WireRevokedKey> => {
    if (!(await revokeKey(db, request.params.id))) throw new NotFound(`No API key with id '${request.params.id}'.`);
    return { id: request.params.id, object: "api_key", revoked: true };
  });
}

function adminAccountRoutes(app: FastifyInstance, { db, onAccountDisabled }: AdminRoutesOptions): void {
  /** Any account's usage, in the same shape as GET /v1/usage (plus the account name). */
  app.get("/admin/v1/usage", async (request, reply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    const account = query.account;
    if (typeof account !== "string" || account.trim() === "") throw new InvalidRequest("Missing required parameter: 'account'.", "account");
    const params = parseUsageParams(query);
    const found = await findAccount(db, account.trim());
    if (!found) throw new NotFound(`No account named '${account.trim()}'.`);
    const report = await queryAccountUsage(db, { accountId: found.id, ...params });
    return reply.type("application/json; charset=utf-8").send(stringifyJson(toWireUsageReport(report, { ...params, account: found.name })));
  });

  for (const [action, disabled] of [
    ["disable", true],
    ["enable", false],
  ] as const) {
    app.post<{ Params: { name: string } }>(`/admin/v1/accounts/:name/${action}`, async (request) => {
      const account = await setAccountDisabled(db, request.params.name, disabled);
      if (!account) throw new NotFound(`No account named '${request.params.name}'.`);
      if (disabled) await onAccountDisabled?.(account.id);
      return toWireAccount(account);
    });
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
