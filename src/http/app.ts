import Fastify, { type FastifyInstance, type FastifyServerOptions } from "fastify";
import type { ChatService } from "../serving/types.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import { API_PREFIXES } from "./api-paths.js";
import { installAuth, loggableUrl, type Authenticate } from "./auth.js";
import { installCors } from "./cors.js";
import { installCompression, type CompressionMode } from "./compression.js";
import { accessLogController, type AccessLogLevel } from "../observability/access-log.js";
import { clientErrorHandler, httpServerOptions, installConnectionGuards, type ConnectionLimits } from "./connections.js";
import { frameworkErrors, installErrorHandlers } from "./errors.js";
import { installJsonBodyParser, installPathParamCheck } from "./edge-input.js";
import { deploymentForwarding } from "./deployment-forwarding.js";
import type { Drain } from "./drain.js";
import { installRequestIds, requestIdFor } from "./request-id.js";
import { consoleRoutes } from "./console.js";
import type { EmbeddingService } from "../serving/embedding-service.js";
import type { TokenService } from "../serving/token-service.js";
import { docsRoutes } from "./routes/docs.js";
import { openApiDocument } from "./openapi.js";
import { servedResources, type Operations } from "../api/registry.js";
import { mountable, registerScopes, type ScopeContext } from "./scopes.js";
import { healthRoutes } from "./routes/health.js";
import { metricsRoutes } from "./routes/metrics.js";
import type { AccountFiles } from "../api/files/endpoints.js";
import { adminRoutes, type AdminRoutesOptions } from "./routes/admin.js";
import type { BatchLimits } from "../batches/limits.js";
import type { BatchService } from "../batches/service.js";
import type { Metrics } from "../observability/metrics.js";
import type { Tracing } from "../observability/tracing.js";
import type { ResponseStore } from "../api/responses/response-store.js";
import type { BackgroundResponses } from "../api/responses/background.js";
import type { CompletionStore } from "../api/chat/completion-store.js";
import type { RequestLimits } from "../limits/ports.js";
import { installRateLimitHeaders } from "./rate-limit-headers.js";
import type { DeploymentService } from "../deployments/types.js";
import type { AdapterLimits, AdapterService } from "../adapters/types.js";
import type { AccountKeys } from "../accounts/account-keys.js";
import type { UsageReports } from "../protocol/usage.js";

export interface AppDeps {
  chat: ChatService;
  /** `/v1/embeddings`; absent: the route is not served. */
  embeddings?: EmbeddingService;
  /** `/tokenize` and `/detokenize` (at the root and under each prefix); absent: not served. */
  tokens?: TokenService;
  registry: ModelRegistry;
  authenticate: Authenticate;
  /** `/v1/usage`: the route only ever asks for the caller's own account. */
  usage: UsageReports;
  /** `/v1/keys`: a key with the manage-keys right manages its own account's keys. */
  keys: AccountKeys;
  /** Largest accepted request body, in bytes. */
  bodyLimit: number;
  /** Levels of objects and arrays a JSON body may nest; default DEFAULT_MAX_JSON_DEPTH. */
  maxJsonDepth?: number;
  metrics: Metrics;
  /** OpenTelemetry traces (observability/tracing.ts); absent: off, and no request is traced. */
  tracing?: Tracing;
  /** Request timeout and the per-IP cap on unauthenticated connections. */
  connections?: Partial<ConnectionLimits>;
  /** Responses kept with `store: true` (the Responses API). */
  responses: ResponseStore;
  /** Where `background: true` responses run; absent: refused. */
  background?: BackgroundResponses;
  /** Chat completions kept with `store: true`; absent: `store` is accepted and nothing is kept. */
  completions?: CompletionStore;
  /** The operations the generation routes run (the batch runner runs the same ones); absent: made from the services above. */
  operations?: Operations;
  /** Read (never taken from) for the rate-limit headers of responses that are not generations. */
  limits?: Pick<RequestLimits, "peek">;
  /** Origins browsers may call the API from; ["*"] (the default) allows any. */
  corsOrigins?: string[];
  /** Which peers' JSON answers are compressed when they accept it (default `auto`: all but loopback). */
  compression?: CompressionMode;
  /** Graceful shutdown (serve.ts drains it on SIGTERM); /health reports it. */
  drain?: Drain;
  /** Dedicated deployments (`/v1/deployments`); absent: the routes are not served. */
  deployments?: DeploymentService;
  /** Uploaded LoRA adapters (`/v1/adapters`); absent: the routes are not served. */
  adapters?: { service: AdapterService; limits: AdapterLimits };
  logger?: FastifyServerOptions["logger"];
  /** One line per answered request at this level (default `debug`: none at the default `info`); see observability/access-log.ts. */
  accessLog?: AccessLogLevel;
  /** The Files and Batch APIs (`/v1/files`, `/v1/batches`); absent: not served. */
  batches?: {
    service: BatchService;
    files: AccountFiles;
    limits: BatchLimits;
  };
  /** Key and account administration under /admin/v1, behind the admin token; absent: not served. */
  admin?: AdminRoutesOptions;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  requestTimeoutMs: 60_000,
  maxUnauthenticatedPerIp: 64,
  streamBufferBytes: 64 * 1024,
  streamPauseTimeoutMs: 60_000,
};

/** Fastify logs each request's URL; its query string may hold a secret, so only the path is kept. */
const requestSerializer = (request: { method: string; url: string; ip?: string }) => ({
  method: request.method,
  url: loggableUrl(request.url),
  remoteAddress: request.ip,
});

/** What every server shares, the worker too: body and connection limits, request ids, errors, auth, CORS, compression. */
export type BaseAppDeps = Pick<
  AppDeps,
  "authenticate" | "bodyLimit" | "maxJsonDepth" | "connections" | "corsOrigins" | "compression" | "logger" | "accessLog" | "drain"
>;

/** The HTTP layer: routes, auth and error rendering. It knows nothing of llama.cpp or storage: services are handed in. */
export function buildApp(deps: AppDeps): FastifyInstance {
  const app = buildBaseApp(deps);
  // A deployment another server process runs is answered by that process (generation and token routes alike).
  const deployments = deps.deployments;
  const scopes: ScopeContext = {
    forward: deployments ? deploymentForwarding(app, (caller, model) => deployments.locate(caller, model)) : () => undefined,
    ...(deps.tracing ? { tracing: deps.tracing } : {}),
    streams: { ...DEFAULT_CONNECTION_LIMITS, ...deps.connections },
  };
  const served = mountable(servedResources(deps));
  void app.register(async (routes) => {
    if (deps.limits) installRateLimitHeaders(routes, deps.limits);
    healthRoutes(routes, deps.registry, deps.drain);
    metricsRoutes(routes, deps.metrics);
    void routes.register(consoleRoutes);
    void routes.register(docsRoutes, { document: openApiDocument });
    registerScopes(routes, served.at("own path", "prefixes and root"), scopes);
    for (const prefix of API_PREFIXES)
      void routes.register(async (api) => registerScopes(api, served.at("prefixes", "prefixes and root"), scopes), { prefix });
  });
  // Its own encapsulated scope, outside the others' hooks, so the admin token's hook guards exactly these routes.
  if (deps.admin) void app.register(adminRoutes, { ...deps.admin, endpoints: served.admin() });
  return app;
}

export function buildBaseApp(deps: BaseAppDeps): FastifyInstance {
  const connections = { ...DEFAULT_CONNECTION_LIMITS, ...deps.connections };
  const logger =
    deps.logger && typeof deps.logger === "object" ? { ...deps.logger, serializers: { req: requestSerializer } } : (deps.logger ?? false);
  const app = Fastify({
    bodyLimit: deps.bodyLimit,
    // The request serializer logs method, path and peer, never headers nor the query: keys stay out of logs.
    logger,
    // Fastify's two lines per request give way to the access log's one, at its level (debug by default).
    logController: accessLogController(deps.accessLog ?? "debug", loggableUrl),
    requestTimeout: connections.requestTimeoutMs,
    http: httpServerOptions(connections),
    clientErrorHandler,
    genReqId: requestIdFor,
    // A bad percent-encoding or an over-long path parameter: answered in the OpenAI shape, URL not echoed.
    frameworkErrors,
  });
  installRequestIds(app);
  installErrorHandlers(app);
  deps.drain?.install(app);
  installJsonBodyParser(app, deps.maxJsonDepth);
  installPathParamCheck(app);
  installConnectionGuards(app, connections);
  installAuth(app, deps.authenticate);
  installCors(app, deps.corsOrigins ?? ["*"]);
  installCompression(app, deps.compression ?? "auto");
  return app;
}
