import type { FastifyInstance, FastifyRequest } from "fastify";
import { Unauthorized } from "../errors.js";
import type { Caller } from "../serving/chat-service.js";

export type Authenticate = (token: string) => Promise<Caller | null>;

declare module "fastify" {
  interface FastifyRequest {
    caller: Caller | null;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * The key a request carries: `Authorization: Bearer`, or `api-key` (Azure-style clients) or
 * `x-api-key` (Anthropic-style clients). A malformed Authorization header counts as absent only
 * when one of the others is present.
 */
function presentedKey(request: FastifyRequest): string | undefined {
  const bearer = BEARER.exec(request.headers.authorization ?? "");
  if (bearer) return bearer[1]!;
  for (const name of ["api-key", "x-api-key"]) {
    const value = request.headers[name];
    if (typeof value === "string" && value.trim()) return value.trim();
  }
  return undefined;
}

/** Every /v1/ route needs a valid API key; the caller it names is on request.caller. */
export function installAuth(app: FastifyInstance, authenticate: Authenticate): void {
  app.decorateRequest("caller", null);
  app.addHook("onRequest", async (request: FastifyRequest) => {
    // A CORS preflight never carries credentials; it is answered before any route runs.
    if (!request.url.startsWith("/v1/") || request.method === "OPTIONS") return;
    const key = presentedKey(request);
    if (!key) throw new Unauthorized("Missing or malformed API key. Send 'Authorization: Bearer <API_KEY>' (or an 'api-key' or 'x-api-key' header).");
    const caller = await authenticate(key);
    if (!caller) throw new Unauthorized("Incorrect API key provided.");
    request.caller = caller;
  });
}

export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new Unauthorized();
  return request.caller;
}
