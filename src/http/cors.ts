import cors from "@fastify/cors";
import type { FastifyInstance } from "fastify";
import { RATE_LIMIT_HEADER_NAMES } from "../protocol/rate-limit-headers.js";

/**
 * Browsers may call the API from the configured origins; keys travel in headers, never cookies, so
 * any origin is safe by default. The admin routes never answer cross-origin requests. CORS is a
 * solved problem: @fastify/cors answers it (a hand-written hook measured no faster end to end,
 * docs/benchmarks/2026-12-06-request-path-cpu.md), with options fixed at start: an options
 * delegator (for the admin exception) made it normalise an options object on every request. The
 * admin routes opt out by their route config instead, set here as each is added, and so does their
 * preflight, answered as any unknown route is.
 */
export function installCors(app: FastifyInstance, origins: string[]): void {
  void app.register(cors, {
    origin: origins.includes("*") ? "*" : origins,
    methods: "GET, POST, PATCH, DELETE, OPTIONS",
    // One string, not a list the plugin joins on every response.
    exposedHeaders: ["x-request-id", "retry-after", ...RATE_LIMIT_HEADER_NAMES].join(", "),
    maxAge: 600,
    // An OPTIONS request that is not a browser's preflight (no Origin) gets the plain 204, not
    // the plugin's text/plain 400, which is not an OpenAI error body.
    strictPreflight: false,
  });
  app.addHook("onRoute", (route) => {
    if (route.url.startsWith(ADMIN_PREFIX)) route.config = { ...route.config, ...CORS_OFF };
  });
  app.options(`${ADMIN_PREFIX}*`, (_request, reply) => reply.callNotFound());
}

/** A route's config that keeps @fastify/cors off it. */
const CORS_OFF = { cors: false } as const;

const ADMIN_PREFIX = "/admin/";
