import cors from "@fastify/cors";
import type { FastifyInstance } from "fastify";
import { RATE_LIMIT_HEADER_NAMES } from "../protocol/rate-limit-headers.js";

/**
 * Browsers may call the API from the configured origins; keys travel in headers, never cookies, so
 * any origin is safe by default. The admin routes never answer cross-origin requests. CORS is a
 * solved problem: @fastify/cors answers it (a hand-written hook measured no faster end to end,
 * docs/benchmarks/2026-12-06-request-path-cpu.md).
 */
export function installCors(app: FastifyInstance, origins: string[]): void {
  const origin = origins.includes("*") ? "*" : origins;
  void app.register(cors, {
    delegator: (request, callback) => {
      const admin = (request.url ?? "").startsWith("/admin/");
      callback(null, {
        origin: admin ? false : origin,
        methods: ["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
        exposedHeaders: ["x-request-id", "retry-after", ...RATE_LIMIT_HEADER_NAMES],
        maxAge: 600,
        // An OPTIONS request that is not a browser's preflight (no Origin) gets the plain 204, not
        // the plugin's text/plain 400, which is not an OpenAI error body.
        strictPreflight: false,
      });
    },
  });
}
