import type { IncomingMessage } from "node:http";
import type { FastifyInstance } from "fastify";
import { newRequestId, type ApiKind } from "../protocol/request-ids.js";

const pathOf = (url: string) => {
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
};

/** The API a path belongs to, under any of the prefixes (`/v1/compat`, `/v1/openai`, `/v1`). */
function apiKindOfPath(path: string): ApiKind | "other" {
  if (!path.startsWith("/v1/")) return "other";
  if (path.endsWith("/chat/completions")) return "chat.completions";
  if (path.endsWith("/completions")) return "completions";
  if (/\/responses(\/|$)/.test(path)) return "responses";
  if (path.endsWith("/embeddings")) return "embeddings";
  return "other";
}

/**
 * Fastify's request id. A client's own `x-request-id` is not trusted: the id keys the ledger row.
 * Only creating a response (POST /responses) gets a response id; retrieving, deleting or cancelling
 * a stored one (its subpaths) gets a plain request id.
 */
export function requestIdFor(request: IncomingMessage): string {
  const path = pathOf(request.url ?? "");
  const kind = apiKindOfPath(path);
  const creates = request.method === "POST" && path.endsWith("/responses");
  return newRequestId(kind === "responses" && !creates ? "other" : kind);
}

/**
 * Every response, errors and streams included, names its request in `x-request-id`. The request
 * hooks here and in connections.ts, drain.ts and edge-input.ts take Fastify's `done` instead of
 * returning a promise: an async hook costs each request a promise and a turn of the microtask
 * queue, for work that never waits.
 */
export function installRequestIds(app: FastifyInstance): void {
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    done();
  });
}
