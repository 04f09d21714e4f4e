import type { IncomingMessage } from "node:http";
import type { FastifyInstance } from "fastify";
import { newRequestId, type ApiKind } from "../protocol/request-ids.js";

/** The API a path belongs to, under any of the prefixes (`/v1/compat`, `/v1/openai`, `/v1`). */
export function apiKindOf(url: string): ApiKind | "other" {
  const path = url.split("?")[0]!;
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
  const url = request.url ?? "";
  const kind = apiKindOf(url);
  const creates = request.method === "POST" && /\/responses$/.test(url.split("?")[0]!);
  return newRequestId(kind === "responses" && !creates ? "other" : kind);
}

/** Every response, errors and streams included, names its request in `x-request-id`. */
export function installRequestIds(app: FastifyInstance): void {
  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
}
