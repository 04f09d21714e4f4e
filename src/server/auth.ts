import type { FastifyInstance, FastifyRequest } from "fastify";
import { InvalidRequest, Unauthorized } from "../errors.js";
import type { Caller } from "../serving/chat-service.js";
import { markAuthenticated } from "./connections.js";

export type Authenticate = (token: string) => Promise<Caller | null>;

declare module "fastify" {
  interface FastifyRequest {
    caller: Caller | null;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Query parameters that would carry a key in the URL, where proxies and access logs keep it. */
const KEY_PARAMS = /(?:^|[?&])(?:api[_-]?key|key|access[_-]?token|token)=/i;

/** Routes anyone may call; the admin routes check the admin key themselves. */
function isPublicRoute(route: string | undefined): boolean {
  return route === undefined || route === "/health" || route === "/metrics" || route.startsWith("/admin/");
}

/**
 * Every API route needs a valid API key; the caller it names is on request.caller. The decision
 * follows the route that matched, not the raw URL, so an absolute-form request line
 * (`POST http://host/v1/...`) cannot slip past a path-prefix check.
 */
export function installAuth(app: FastifyInstance, authenticate: Authenticate): void {
  app.decorateRequest("caller", null);
  app.addHook("onRequest", async (request: FastifyRequest) => {
    const query = request.url.indexOf("?");
    if (query !== -1 && KEY_PARAMS.test(request.url.slice(query))) {
      throw new InvalidRequest("API keys are not accepted in the URL; send 'Authorization: Bearer <API_KEY>' instead (and revoke a key sent in a URL).", null, "api_key_in_url");
    }
    if (isPublicRoute(request.routeOptions.url)) return;
    const match = BEARER.exec(request.headers.authorization ?? "");
    if (!match) throw new Unauthorized("Missing or malformed Authorization header. Send 'Authorization: Bearer <API_KEY>'.");
    const caller = await authenticate(match[1]!);
    if (!caller) throw new Unauthorized("Incorrect API key provided.");
    request.caller = caller;
    markAuthenticated(request);
  });
}

export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new Unauthorized();
  return request.caller;
}

/** The URL as it may be logged: the path only, since a query string may carry secrets. */
export function loggableUrl(url: string): string {
  const query = url.indexOf("?");
  return query === -1 ? url : `${url.slice(0, query)}?…`;
}
