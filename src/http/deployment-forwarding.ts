/**
 * Gateways sharing one database serve any deployment: a request naming a deployment that another
 * live server process runs is sent to that process as it came (method, path, body, the caller's
 * key and other headers) and its answer streamed back unchanged, SSE included. The owner
 * authenticates the same key against the same database and writes the one ledger row, applying
 * limits and budgets; this side meters nothing, so nothing is billed twice. A batch line for such a
 * deployment goes the same way (createLineForwarder), with a one-time pass as its credential.
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
 * The forwarding, for the generation and token routes (POSTs whose JSON body names a `model`):
 * returns what adds it to a scope, all scopes sharing one connection pool, closed with `app`. It
 * runs as a preHandler: after authentication, and only for the caller's own deployment (the lookup
 * says so), so another account's request is answered here, with the usual 404.
 */
export function deploymentForwarding(app: FastifyInstance, locate: LocateDeployment): (scope: FastifyInstance) => void {
  const agent = newAgent();
  app.addHook("onClose", async () => agent.close());
  const forwardIfElsewhere = async (request: FastifyRequest, reply: FastifyReply, model: string) => {
    const ownerUrl = await locate(callerOf(request), model);
    if (ownerUrl !== null) await forward(request, reply, { ownerUrl, model }, agent);
  };
  // `done` rather than async, so a request with nothing to look up costs no promise.
  return (scope) =>
    scope.addHook("preHandler", (request, reply, done) => {
      const model = (request.body as { model?: unknown } | undefined)?.model;
      if (request.method !== "POST" || request.headers[FORWARDED_HEADER] !== undefined || typeof model !== "string") return done();
      forwardIfElsewhere(request, reply, model).then(() => done(), done);
    });
}

interface ForwardTarget {
  ownerUrl: string;
  model: string;
}

const newAgent = () => new Agent({ keepAliveTimeout: 30_000, connect: { timeout: 5_000 } });

async function forward(request: FastifyRequest, reply: FastifyReply, { ownerUrl, model }: ForwardTarget, agent: Agent): Promise<void> {
  let response: Dispatcher.ResponseData;
  try {
    response = await send(new URL(request.url, ownerUrl), {
      method: "POST",
      dispatcher: agent,
      headers: { ...passOn(request.headers), "content-type": "application/json", [FORWARDED_HEADER]: "1" },
      // The parsed body again as JSON: the same values the caller sent.
      body: JSON.stringify(request.body),
      signal: abortOnDisconnect(reply),
      // The owner may queue the request (tiers) or generate at length before answering.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  } catch (error) {
    request.log.warn({ err: error, ownerUrl }, "cannot reach the server process running a deployment");
    throw unreachable(model);
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

const unreachable = (model: string) =>
  new CapacityUnavailable(`The deployment '${model}' runs on another server process, which cannot be reached now; retry shortly.`, 5);

/** A batch line for a deployment another process runs, as sent there. */
export interface ForwardedLine {
  /** The batch's endpoint (`/v1/chat/completions`, ...). */
  endpoint: string;
  /** The line's JSON body. */
  body: string;
  model: string;
  /** The one-time pass (accounts/batch-line-passes.ts) that names the line's key and batch to the owner. */
  pass: string;
}

/** The owner's answer to a forwarded line: its status, its body, and its `x-request-id` (the ledger row it wrote). */
export interface ForwardedAnswer {
  statusCode: number;
  body: string;
  requestId: string | null;
}

/**
 * Sends batch lines to the server processes running their deployments, over HTTP as a client's
 * request would be forwarded; the owner redeems the pass, writes the one ledger row and answers.
 */
export function createLineForwarder() {
  const agent = newAgent();
  return {
    async send(ownerUrl: string, line: ForwardedLine, signal: AbortSignal): Promise<ForwardedAnswer> {
      // The owner unreachable, or gone before its whole answer came: a 503, so the line runs again.
      try {
        const response = await send(new URL(line.endpoint, ownerUrl), {
          method: "POST",
          dispatcher: agent,
          headers: { authorization: `Bearer ${line.pass}`, "content-type": "application/json", [FORWARDED_HEADER]: "1" },
          body: line.body,
          signal,
          headersTimeout: 0,
          bodyTimeout: 0,
        });
        const requestId = response.headers["x-request-id"];
        const body = await response.body.text();
        return { statusCode: response.statusCode, body, requestId: typeof requestId === "string" ? requestId : null };
      } catch {
        throw unreachable(line.model);
      }
    },
    close: () => agent.close(),
  };
}
