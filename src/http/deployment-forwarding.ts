/**
 * Gateways sharing one database serve any deployment: a request naming a deployment that another
 * live server process runs is sent to that process as it came (method, path, body, the caller's
 * key and other headers) and its answer streamed back unchanged, SSE included. The owner
 * authenticates the same key against the same database and writes the one ledger row, applying
 * limits and budgets; this side meters nothing, so nothing is billed twice.
 */
import type { IncomingHttpHeaders } from "node:http";
import { pipeline } from "node:stream/promises";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Agent, request as send, type Dispatcher } from "undici";
import { CapacityUnavailable } from "../errors.js";
import { callerOf } from "./auth.js";
import type { Principal } from "../protocol/principal.js";
import { abortOnDisconnect } from "./runs.js";

/** The URL of the server process to send a request for `model` to; null when this one answers. */
export type LocateDeployment = (caller: Principal, model: string) => Promise<string | null>;

/** A batch line's own bearer token for the owner (its line tokens exist only in this process); null: the caller's headers as they came. */
export type LinePassFor = (caller: Principal) => Promise<string | null>;

/** Marks a forwarded request: the process receiving it answers it itself, never forwards it again. */
export const FORWARDED_HEADER = "x-switchyard-forwarded";

/** Hop-by-hop headers (RFC 9110 §7.6.1) and those the hop itself recomputes; never passed on. */
const HOP_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
]);

/**
 * Adds the forwarding to the generation routes of `app` (POSTs whose JSON body names a `model`).
 * It runs as a preHandler: after authentication, and only for the caller's own deployment (the
 * lookup says so), so another account's request is answered here, with the usual 404.
 */
export function installDeploymentForwarding(app: FastifyInstance, locate: LocateDeployment, linePassFor?: LinePassFor): void {
  const agent = new Agent({ keepAliveTimeout: 30_000, connect: { timeout: 5_000 } });
  app.addHook("onClose", async () => agent.close());
  app.addHook("preHandler", async (request, reply) => {
    if (request.method !== "POST" || request.headers[FORWARDED_HEADER] !== undefined) return;
    const model = (request.body as { model?: unknown } | undefined)?.model;
    if (typeof model !== "string") return;
    const caller = callerOf(request);
    const ownerUrl = await locate(caller, model);
    if (ownerUrl === null) return;
    const linePass = (await linePassFor?.(caller)) ?? null;
    await forward(request, reply, { ownerUrl, model, linePass }, agent);
  });
}

interface ForwardTarget {
  ownerUrl: string;
  model: string;
  linePass: string | null;
}

async function forward(
  request: FastifyRequest,
  reply: FastifyReply,
  { ownerUrl, model, linePass }: ForwardTarget,
  agent: Agent,
): Promise<void> {
  let response: Dispatcher.ResponseData;
  const credential = linePass === null ? {} : { authorization: `Bearer ${linePass}` };
  try {
    response = await send(new URL(request.url, ownerUrl), {
      method: "POST",
      dispatcher: agent,
      headers: { ...passOn(request.headers), ...credential, "content-type": "application/json", [FORWARDED_HEADER]: "1" },
      // The parsed body again as JSON: the same values the caller sent.
      body: JSON.stringify(request.body),
      signal: abortOnDisconnect(reply),
      // The owner may queue the request (tiers) or generate at length before answering.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  } catch (error) {
    request.log.warn({ err: error, ownerUrl }, "cannot reach the server process running a deployment");
    throw new CapacityUnavailable(
      `The deployment '${model}' runs on another server process, which cannot be reached now; retry shortly.`,
      5,
    );
  }
  // Headers set by hooks here (CORS) go out too; the owner's own win (its x-request-id names the ledger row).
  const hookHeaders = Object.fromEntries(Object.entries(reply.getHeaders()).filter(([, v]) => v !== undefined));
  reply.hijack();
  reply.raw.writeHead(response.statusCode, { ...hookHeaders, ...passOn(response.headers) });
  reply.raw.flushHeaders();
  try {
    await pipeline(response.body, reply.raw);
  } catch (error) {
    // The owner went away mid-answer (its rows are closed by the reconciliation), or the caller did:
    // the cut connection tells the caller the answer is incomplete.
    request.log.warn({ err: error }, "forwarded answer ended early");
    reply.raw.destroy();
  }
}

function passOn(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_HEADERS.has(name.toLowerCase())) kept[name] = value;
  }
  return kept;
}
