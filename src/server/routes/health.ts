import type { FastifyInstance } from "fastify";
import type { ModelRegistry } from "../../serving/model-registry.js";

/** Unauthenticated liveness and readiness: 200 once every model is loaded, 503 before. */
export function healthRoutes(app: FastifyInstance, registry: ModelRegistry): void {
  app.get("/health", async (_request, reply) => {
    const models = registry.list().map(({ entry, state, backend, error }) => ({
      id: entry.id,
      state,
      ...(backend ? backend.stats() : {}),
      ...(error ? { error } : {}),
    }));
    const ready = registry.allReady();
    return reply.status(ready ? 200 : 503).send({ status: ready ? "ok" : "loading", models });
  });
}
