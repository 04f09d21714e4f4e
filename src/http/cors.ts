import type { FastifyInstance, FastifyReply } from "fastify";
import { RATE_LIMIT_HEADER_NAMES } from "../protocol/rate-limit-headers.js";

declare module "fastify" {
  interface FastifyRequest {
    /** A CORS preflight this app answers (the `OPTIONS *` route below answers it, anything else is a 404). */
    corsPreflight: boolean;
  }
}

const EXPOSED_HEADERS = ["x-request-id", "retry-after", ...RATE_LIMIT_HEADER_NAMES].join(", ");
const ALLOWED_METHODS = ["GET", "POST", "PATCH", "DELETE", "OPTIONS"].join(", ");
const PREFLIGHT_MAX_AGE_S = "600";

/**
 * Browsers may call the API from the configured origins (["*"]: any); keys travel in headers,
 * never cookies, so any origin is safe by default. The admin routes never answer cross-origin
 * requests, their preflights included (a 404).
 *
 * What @fastify/cors did with these options, in one synchronous request hook with its header
 * values made once: the plugin's options delegator (the admin routes' exception) had it normalise
 * an options object on every request, 3% of the main thread's CPU for one embedding
 * (docs/benchmarks/2026-12-06-request-path-cpu.md). A preflight (any OPTIONS request, with or
 * without an Origin) is answered 204 before any route or key check runs.
 */
export function installCors(app: FastifyInstance, origins: string[]): void {
  const anyOrigin = origins.includes("*");
  const allowed = new Set(origins);
  app.decorateRequest("corsPreflight", false);
  app.addHook("onRequest", (request, reply, done) => {
    // The answer depends on the Origin (a listed origin is echoed, the admin routes' answer none).
    addVary(reply, "Origin");
    if (request.url.startsWith("/admin/")) return done();
    const origin = request.headers.origin;
    const allowOrigin = anyOrigin ? "*" : origin !== undefined && allowed.has(origin) ? origin : undefined;
    if (allowOrigin !== undefined) reply.header("Access-Control-Allow-Origin", allowOrigin);
    reply.header("Access-Control-Expose-Headers", EXPOSED_HEADERS);
    if (request.raw.method !== "OPTIONS") return done();
    request.corsPreflight = true;
    reply.header("Access-Control-Allow-Methods", ALLOWED_METHODS);
    addVary(reply, "Access-Control-Request-Headers");
    const asked = request.headers["access-control-request-headers"];
    if (asked !== undefined) reply.header("Access-Control-Allow-Headers", asked);
    reply.header("Access-Control-Max-Age", PREFLIGHT_MAX_AGE_S);
    // Safari waits for a body on a 204 without a length.
    void reply.code(204).header("Content-Length", "0").send();
  });
  // Lets the router take any OPTIONS request; the hook above has answered each preflight already.
  app.options("*", (request, reply) => (request.corsPreflight ? reply.send() : reply.callNotFound()));
}

/** Adds `name` to the response's Vary header, once. */
function addVary(reply: FastifyReply, name: string): void {
  const vary = reply.getHeader("Vary");
  if (vary === undefined || vary === "") {
    reply.header("Vary", name);
    return;
  }
  const value = String(vary);
  if (
    value === "*" ||
    value
      .toLowerCase()
      .split(/\s*,\s*/)
      .includes(name.toLowerCase())
  )
    return;
  reply.header("Vary", `${value}, ${name}`);
}
