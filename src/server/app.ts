import Fastify, { type FastifyInstance, type FastifyServerOptions } from "fastify";
import type { ChatService } from "../serving/chat-service.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import { installAuth, type Authenticate } from "./auth.js";
import { consoleRoutes } from "./console.js";
import { installErrorHandlers } from "./errors.js";
import { accountKeyRoutes } from "./routes/account-keys.js";
import { chatRoutes } from "./routes/chat.js";
import { healthRoutes } from "./routes/health.js";
import { metricsRoutes } from "./routes/metrics.js";
import { modelRoutes } from "./routes/models.js";
import { usageRoutes } from "./routes/usage.js";
import type { Database } from "../storage/database.js";
import type { Metrics } from "../observability/metrics.js";

export interface AppDeps {
  chat: ChatService;
  registry: ModelRegistry;
  authenticate: Authenticate;
  /** The usage report reads the ledger; the route only ever queries the caller's own account. */
  db: Database;
  /** Largest accepted request body, in bytes. */
  bodyLimit: number;
  metrics: Metrics;
  logger?: FastifyServerOptions["logger"];
}

/** The HTTP layer: routes, auth and error rendering. It knows nothing of llama.cpp or storage. */
export function buildApp(deps: AppDeps): FastifyInstance {
  const app = Fastify({
    bodyLimit: deps.bodyLimit,
    // Fastify's default request serializer logs method, URL and peer, never headers: keys stay out of logs.
    logger: deps.logger ?? false,
  });
  installErrorHandlers(app);
  installAuth(app, deps.authenticate);
  healthRoutes(app, deps.registry);
  metricsRoutes(app, deps.metrics);
  modelRoutes(app, deps.registry);
  chatRoutes(app, deps.chat);
  usageRoutes(app, deps.db);
  accountKeyRoutes(app, deps.db);
  void app.register(consoleRoutes);
  return app;
}
