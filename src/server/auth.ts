import type { FastifyInstance, FastifyRequest } from "fastify";
import { Unauthorized } from "../errors.js";
import type { Caller } from "../serving/chat-service.js";

/** The serving layer's caller, plus what only the account-scoped key API needs. */
export interface ApiCaller extends Caller {
  accountName: string;
  /** The key was created with the manage-keys right: it may list, create and revoke its account's keys. */
  manageKeys: boolean;
}

export type Authenticate = (token: string) => Promise<ApiCaller | null>;

declare module "fastify" {
  interface FastifyRequest {
    caller: ApiCaller | null;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Every /v1/ route needs a valid API key; the caller it names is on request.caller. */
export function installAuth(app: FastifyInstance, authenticate: Authenticate): void {
  app.decorateRequest("caller", null);
  app.addHook("onRequest", async (request: FastifyRequest) => {
    if (!request.url.startsWith("/v1/")) return;
    const match = BEARER.exec(request.headers.authorization ?? "");
    if (!match) throw new Unauthorized("Missing or malformed Authorization header. Send 'Authorization: Bearer <API_KEY>'.");
    const caller = await authenticate(match[1]!);
    if (!caller) throw new Unauthorized("Incorrect API key provided.");
    request.caller = caller;
  });
}

export function callerOf(request: FastifyRequest): ApiCaller {
  if (!request.caller) throw new Unauthorized();
  return request.caller;
}
