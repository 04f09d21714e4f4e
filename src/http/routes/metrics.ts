import type { FastifyInstance } from "fastify";
import type { Metrics } from "../../observability/metrics.js";

/** Prometheus scrape endpoint. Like /health it needs no key: it holds load figures, nothing of any account. */
export function metricsRoutes(app: FastifyInstance, metrics: Metrics): void {
  app.get("/metrics", async (_request, reply) => reply.type(metrics.contentType).send(await metrics.render()));
}
