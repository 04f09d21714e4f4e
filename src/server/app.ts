import Fastify, { type FastifyInstance, type FastifyServerOptions } from "fastify";
import type { ChatService } from "../serving/chat-service.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import { installAuth, loggableUrl, type Authenticate } from "./auth.js";
import { clientErrorHandler, httpServerOptions, installConnectionGuards, type ConnectionLimits } from "./connections.js";
import { installErrorHandlers } from "./errors.js";
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
  /** Request timeout and the per-IP cap on unauthenticated connections. */
  connections?: Partial<ConnectionLimits>;
  logger?: FastifyServerOptions["logger"];
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = { requestTimeoutMs: 60_000, maxUnauthenticatedPerIp: 64 };

/** Fastify logs each request's URL; its query string may hold a secret, so only the path is kept. */
const requestSerializer = (request: { method: string; url: string; ip?: string }) => ({ method: request.method, url: loggableUrl(request.url), remoteAddress: request.ip });

/** The HTTP layer: routes, auth and error rendering. It knows nothing of llama.cpp or storage. */
export function buildApp(deps: AppDeps): FastifyInstance {
  const connections = { ...DEFAULT_CONNECTION_LIMITS, ...deps.connections };
  const logger = deps.logger && typeof deps.logger === "object" ? { ...deps.logger, serializers: { req: requestSerializer } } : (deps.logger ?? false);
  const app = Fastify({
    bodyLimit: deps.bodyLimit,
    // The request serializer logs method, path and peer, never headers nor the query: keys stay out of logs.
    logger,
    requestTimeout: connections.requestTimeoutMs,
    http: httpServerOptions(connections),
    clientErrorHandler,
  });
  installErrorHandlers(app);
  installConnectionGuards(app, connections);
  installAuth(app, deps.authenticate);
  healthRoutes(app, deps.registry);
  metricsRoutes(app, deps.metrics);
  modelRoutes(app, deps.registry);
  chatRoutes(app, deps.chat);
  usageRoutes(app, deps.db);
  return app;
}
