import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { toWireAccount, toWireCreatedKey, toWireKey, type WireRevokedKey } from "../../accounts/admin-wire.js";
import { createKey, listKeys, revokeKey, setAccountDisabled } from "../../accounts/store.js";
import { InvalidRequest, NotFound, Unauthorized } from "../../errors.js";
import type { Database } from "../../storage/database.js";

export interface AdminRoutesOptions {
  db: Database;
  /** The token in force for this server: SWITCHYARD_ADMIN_KEY, or the one written to server.json. */
  adminToken: string;
}

const createKeyBody = z.object({
  account: z.string().min(1),
  name: z.string().nullish(),
  /** Unix seconds or an ISO 8601 date. */
  expires_at: z.union([z.number().positive(), z.string().min(1)]).nullish(),
  allowed_models: z.array(z.string()).nullish(),
});

const listKeysQuery = z.object({ account: z.string().optional() });

/**
 * Key and account administration under /admin/v1, for operators and for the CLI while a server
 * holds the database. Registered as its own encapsulated plugin, so its auth hook guards exactly
 * these routes.
 */
export async function adminRoutes(app: FastifyInstance, opts: AdminRoutesOptions): Promise<void> {
  if (!opts.adminToken) throw new Error("adminRoutes needs a non-empty admin token.");
  const expectedTokenHash = sha256(opts.adminToken);
  const { db } = opts;

  app.addHook("onRequest", async (request) => {
    if (!hasAdminToken(request, expectedTokenHash)) {
      throw new Unauthorized("Invalid or missing admin token. Send 'Authorization: Bearer <ADMIN_KEY>'.");
    }
  });

  app.post("/admin/v1/keys", async (request, reply) => {
    const body = parse(createKeyBody, request.body ?? {});
    const created = await createKey(db, {
      account: body.account,
      name: body.name ?? undefined,
      expiresAt: body.expires_at == null ? undefined : parseExpiry(body.expires_at),
      allowedModels: body.allowed_models ?? undefined,
    });
    return reply.code(201).send(toWireCreatedKey(created));
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

  for (const [action, disabled] of [["disable", true], ["enable", false]] as const) {
    app.post<{ Params: { name: string } }>(`/admin/v1/accounts/:name/${action}`, async (request) => {
      const account = await setAccountDisabled(db, request.params.name, disabled);
      if (!account) throw new NotFound(`No account named '${request.params.name}'.`);
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

function parse<T>(schema: z.ZodType<T>, input: unknown): T {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const param = issue && issue.path.length > 0 ? issue.path.join(".") : null;
  throw new InvalidRequest(param ? `Invalid '${param}': ${issue?.message}` : `Invalid request: ${issue?.message ?? "malformed"}`, param);
}

function parseExpiry(value: number | string): Date {
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(date.getTime())) throw new InvalidRequest("expires_at must be unix seconds or an ISO 8601 date.", "expires_at");
  if (date.getTime() <= Date.now()) throw new InvalidRequest("expires_at must be in the future.", "expires_at");
  return date;
}
