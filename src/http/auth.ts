import type { FastifyInstance, FastifyRequest } from "fastify";
import { InvalidRequest, Unauthorized } from "../errors.js";
import type { Principal } from "../protocol/principal.js";
import { markAuthenticated } from "./connections.js";
import type { Auth } from "./route-spec.js";

export type Authenticate = (token: string) => Promise<Principal | null>;

declare module "fastify" {
  interface FastifyRequest {
    caller: Principal | null;
  }
  interface FastifyContextConfig {
    /** The route's declared auth (route-spec.ts); a route that declares none needs a key. */
    auth?: Auth;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Query parameters that would carry a key in the URL, where proxies and access logs keep it. */
const KEY_PARAMS = /(?:^|[?&])(?:api[_-]?key|key|access[_-]?token|token)=/i;

/**
 * Whether a request needs an API key, from the auth its route declares: "none" is public, and the
 * admin routes check the admin key themselves. A request no route matched goes on to the 404; a
 * route that declares nothing needs a key, so a route added without a declaration is never open.
 */
function needsKey(request: FastifyRequest): boolean {
  if (request.routeOptions.url === undefined) return false;
  return (request.routeOptions.config?.auth ?? "key") === "key";
}

/** Every route registered in `app`'s scope from here on is public (a plugin's static files). */
export function declarePublic(app: FastifyInstance): void {
  app.addHook("onRoute", (options) => {
    options.config = { ...options.config, auth: "none" };
  });
}

/**
 * The key a request carries: `Authorization: Bearer`, or `api-key` (Azure-style clients) or
 * `x-api-key` (Anthropic-style clients). A malformed Authorization header counts as absent only
 * when one of the others is present.
 */
function presentedKey(request: FastifyRequest): string | undefined {
  // Node keeps only the first of repeated Authorization headers; which one a proxy or the client meant is unknown.
  const authorizations = request.raw.rawHeaders.filter((name, i) => i % 2 === 0 && name.toLowerCase() === "authorization").length;
  if (authorizations > 1)
    throw new InvalidRequest(
      `The request has ${authorizations} Authorization headers; send exactly one.`,
      null,
      "duplicate_authorization_header",
    );
  const bearer = BEARER.exec(request.headers.authorization ?? "");
  if (bearer) return bearer[1]!;
  for (const name of ["api-key", "x-api-key"]) {
    const value = request.headers[name];
    if (typeof value === "string" && value.trim()) return value.trim();
  }
  return undefined;
}

/**
 * Every route that declares key auth needs a valid API key; the caller it names is on
 * request.caller. The decision follows the route that matched (its declaration), not the raw URL, so an absolute-form request line
 * (`POST http://host/v1/...`) cannot slip past a path-prefix check.
 */
export function installAuth(app: FastifyInstance, authenticate: Authenticate): void {
  app.decorateRequest("caller", null);
  app.addHook("onRequest", async (request: FastifyRequest) => {
    const query = request.url.indexOf("?");
    if (query !== -1 && KEY_PARAMS.test(request.url.slice(query))) {
      throw new InvalidRequest(
        "API keys are not accepted in the URL; send 'Authorization: Bearer <API_KEY>' instead (and revoke a key sent in a URL).",
        null,
        "api_key_in_url",
      );
    }
    // A CORS preflight never carries credentials; it is answered before any route runs.
    if (!needsKey(request) || request.method === "OPTIONS") return;
    const key = presentedKey(request);
    if (!key)
      throw new Unauthorized(
        "Missing or malformed API key. Send 'Authorization: Bearer <API_KEY>' (or an 'api-key' or 'x-api-key' header).",
      );
    const caller = await authenticate(key);
    if (!caller) throw new Unauthorized("Incorrect API key provided.");
    request.caller = caller;
    markAuthenticated(request, caller);
  });
}

export function callerOf(request: FastifyRequest): Principal {
  if (!request.caller) throw new Unauthorized();
  return request.caller;
}

/** The URL as it may be logged: the path only, since a query string may carry secrets. */
export function loggableUrl(url: string): string {
  const query = url.indexOf("?");
  return query === -1 ? url : `${url.slice(0, query)}?…`;
}
