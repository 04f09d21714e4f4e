import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AccountAdmin } from "../../accounts/account-admin.js";
import type { AdminEndpoint, Endpoint } from "../../api/endpoint.js";
import type { UsageReports } from "../../protocol/usage.js";
import { RateLimited, Unauthorized } from "../../errors.js";
import { AdminThrottle, type AdminThrottleOptions } from "../admin-throttle.js";
import { registerEndpoints } from "../endpoint-routes.js";

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

/** What guards the admin routes: the token, and the throttle on failed attempts. */
type AdminGuard = Pick<AdminRoutesOptions, "adminToken" | "throttle">;

/**
 * Key and account administration under /admin/v1 (api/admin/endpoints.ts), registered as its own
 * encapsulated plugin, so its auth hook guards exactly these routes. `endpoints`: the ones the
 * registry made (api/registry.ts) from `admin` and `usage`.
 */
export async function adminRoutes(app: FastifyInstance, opts: AdminGuard & { endpoints: Array<AdminEndpoint | Endpoint> }): Promise<void> {
  if (!opts.adminToken) throw new Error("adminRoutes needs a non-empty admin token.");
  requireAdminToken(app, opts);
  registerEndpoints(app, opts.endpoints);
}

/** Every admin route needs the admin token; an address that keeps guessing is locked out for a while. */
function requireAdminToken(app: FastifyInstance, opts: AdminGuard): void {
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
