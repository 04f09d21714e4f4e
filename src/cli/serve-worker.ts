import { createChatService } from "../serving/chat-service.js";
import { createModelRegistry, type ModelRegistry } from "../serving/model-registry.js";
import { UNMETERED } from "../serving/unmetered.js";
import { createMetrics } from "../observability/metrics.js";
import { buildWorkerApp } from "../http/worker-app.js";
import { startTracing } from "../observability/tracing.js";
import type { CatalogEntry } from "../catalog/types.js";
import type { Settings } from "../config/settings.js";
import { edgeOptions } from "./serve-services.js";
import { processEnvironment } from "../config/environment.js";

type LoadModels = (catalog: CatalogEntry[], registry: ModelRegistry, settings: Settings) => Promise<unknown>;

/**
 * `switchyard serve --worker`: the models and the engine API, for a gateway. It refuses to start
 * without SWITCHYARD_WORKER_KEY, wherever it listens: it has no accounts, so the key is its only gate,
 * and a loopback address still lets every local user in.
 */
export async function runWorker(settings: Settings, catalog: CatalogEntry[], loadModels: LoadModels): Promise<void> {
  if (!settings.workerKey)
    throw new Error(
      "serve --worker needs SWITCHYARD_WORKER_KEY (16 characters or more): the key the gateway sends, and the only thing that guards this worker.",
    );
  const registry = createModelRegistry(catalog);
  const tracing = await startTracing(processEnvironment());
  const metrics = createMetrics(() =>
    registry.list().flatMap(({ entry, backend }) => (backend ? [{ model: entry.id, stats: backend.stats() }] : [])),
  );
  const app = buildWorkerApp({
    chat: createChatService({ registry, ...UNMETERED, metrics }),
    registry,
    metrics,
    ...(tracing ? { tracing } : {}),
    workerKey: settings.workerKey,
    ...edgeOptions(settings),
  });
  const address = await app.listen({ host: settings.host, port: settings.port });
  process.stdout.write(`Worker: ${address}/v1 (engine API for a gateway; key: SWITCHYARD_WORKER_KEY)\n`);
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => app.server.closeAllConnections(), 10_000).unref();
    await app.close();
    await registry.closeAll();
    await tracing?.shutdown(5_000);
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  await loadModels(catalog, registry, settings);
  app.log.info(`worker serving ${catalog.map((m) => m.id).join(", ")} on ${address}/v1`);
}
