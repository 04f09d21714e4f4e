import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { Metrics } from "../observability/metrics.js";
import type { Tracing } from "../observability/tracing.js";
import type { ChatService } from "../serving/types.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import { API_PREFIXES } from "./api-paths.js";
import { buildBaseApp, DEFAULT_CONNECTION_LIMITS, type BaseAppDeps } from "./app.js";
import type { Authenticate } from "./auth.js";
import type { Principal } from "../protocol/principal.js";
import { healthRoutes } from "./routes/health.js";
import { metricsRoutes } from "./routes/metrics.js";
import { servedResources } from "../api/registry.js";
import { mountable, registerScopes, type ScopeContext } from "./scopes.js";

export interface WorkerAppDeps extends Omit<BaseAppDeps, "authenticate"> {
  chat: ChatService;
  registry: ModelRegistry;
  metrics: Metrics;
  /** OpenTelemetry traces; absent: off. A gateway's `traceparent` makes each request its upstream call's child. */
  tracing?: Tracing;
  /** The one key a gateway presents (SWITCHYARD_WORKER_KEY). */
  workerKey: string;
}

/**
 * `serve --worker`: the engine API for a gateway in front of it. Chat and legacy completions, the
 * models list, /health and /metrics; no accounts, ledger, limits, budgets, console or admin. The
 * gateway's `prompt_cache_key` (an opaque hash of the account and its key) is the prefix-cache
 * namespace, so accounts' cached prompts stay apart here as they do in the gateway.
 */
export function buildWorkerApp(deps: WorkerAppDeps): FastifyInstance {
  const app = buildBaseApp({ ...deps, authenticate: workerAuthenticate(deps.workerKey), corsOrigins: deps.corsOrigins ?? [] });
  // Given the chat service and the models alone, the registry serves chat, legacy completions and
  // the models list: a worker keeps no stored responses, serves no embeddings, and forwards nothing.
  const served = mountable(servedResources({ chat: deps.chat, registry: deps.registry }));
  const scopes: ScopeContext = {
    forward: () => undefined,
    ...(deps.tracing ? { tracing: deps.tracing } : {}),
    streams: { ...DEFAULT_CONNECTION_LIMITS, ...deps.connections },
  };
  void app.register(async (routes) => {
    healthRoutes(routes, deps.registry);
    metricsRoutes(routes, deps.metrics);
    for (const prefix of API_PREFIXES)
      void routes.register(async (api) => registerScopes(api, served.at("prefixes", "prefixes and root"), scopes), { prefix });
  });
  return app;
}

/** The gateway, as the one caller a worker has. */
const GATEWAY: Principal = {
  accountId: "gateway",
  accountName: "gateway",
  keyId: "gateway",
  allowedModels: null,
  limits: { requestsPerMinute: null, tokensPerMinute: null, budgetUsd: null },
  manageKeys: false,
  manageDeployments: false,
};

/** Compares digests in constant time, so neither the key's bytes nor its length leak through timing. */
export function workerAuthenticate(workerKey: string): Authenticate {
  const expected = createHash("sha256").update(workerKey).digest();
  return async (token) => (timingSafeEqual(createHash("sha256").update(token).digest(), expected) ? GATEWAY : null);
}
