import type { FastifyInstance } from "fastify";
import type { ModelRegistry } from "../../serving/model-registry.js";

/** Unauthenticated readiness: 200 once every model is loaded; 503 while loading, or if one failed to load. */
export function healthRoutes(app: FastifyInstance, registry: ModelRegistry): void {
  app.get("/health", async (_request, reply) => {
    const models = registry.list().map(({ entry, state, backend, error }) => ({
      id: entry.id,
      state,
      ...(backend ? backend.stats() : {}),
      ...(error ? { error } : {}),
    }));
    const ready = registry.allReady();
    const status = ready ? "ok" : models.some((m) => m.state === "loading") ? "loading" : "degraded";
    return reply.status(ready ? 200 : 503).send({ status, models });
  });
}
