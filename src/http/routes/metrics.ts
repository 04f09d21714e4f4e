import type { FastifyInstance } from "fastify";
import type { Metrics } from "../../observability/metrics.js";
import { route, type RouteSpec } from "../route-spec.js";

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const metricsOperations = {
  metrics: {
    method: "get",
    path: "/metrics",
    id: "metrics",
    summary: "Prometheus metrics (vLLM names)",
    auth: "none",
    response: { description: "Prometheus text.", contentType: "text/plain" },
    errors: [],
  },
} satisfies Record<string, RouteSpec>;

/** Prometheus scrape endpoint. Like /health it needs no key: it holds load figures, nothing of any account. */
export function metricsRoutes(app: FastifyInstance, metrics: Metrics): void {
  route(app, metricsOperations.metrics, async (_request, reply) => reply.type(metrics.contentType).send(await metrics.render()));
}
