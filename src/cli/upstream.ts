import { createUpstreamBackend } from "../backends/upstream/upstream-backend.js";
import type { Backend } from "../backends/backend.js";
import type { CatalogEntry, UpstreamBackendSpec } from "../catalog/types.js";
import type { Settings } from "../config/settings.js";
import { systemFingerprint } from "../serving/fingerprint.js";
import { processEnvironment } from "../config/environment.js";

/** Per replica, when the catalog entry sets no `max_concurrency`. */
const DEFAULT_MAX_CONCURRENCY = 8;

/**
 * A catalog entry served by upstream engines. Its key is read from the environment variable the
 * entry names, here at start, so it never sits in the catalog file.
 */
export function upstreamBackend(
  entry: CatalogEntry,
  spec: UpstreamBackendSpec,
  settings: Settings,
  env: NodeJS.ProcessEnv = processEnvironment(),
): { backend: Backend; fingerprint: string } {
  const apiKey = spec.api_key_env ? env[spec.api_key_env] : undefined;
  if (spec.api_key_env && !apiKey)
    throw new Error(`The catalog entry '${entry.id}' reads its upstream key from ${spec.api_key_env}, which is not set.`);
  const model = spec.model ?? entry.id;
  const backend = createUpstreamBackend({
    replicas: spec.replicas,
    apiKey,
    model,
    maxConcurrency: spec.max_concurrency ?? DEFAULT_MAX_CONCURRENCY,
    contextWindow: Math.min(entry.context_length, settings.maxContext),
    maxWaiting: settings.maxWaiting,
    flexMaxWaitMs: settings.flexMaxWaitMs,
    sendPriority: spec.send_priority ?? false,
  });
  void backend.checkHealth();
  // The gateway cannot see the upstream's weights: the fingerprint names what it routes to.
  return { backend, fingerprint: systemFingerprint(`upstream:${model}`, { replicas: spec.replicas.join(",") }) };
}
