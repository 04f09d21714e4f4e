import { readFile } from "node:fs/promises";
import { createLocalEngineBackend } from "../backends/local-engine.js";
import { ensureModels } from "../catalog/pull.js";
import type { CatalogEntry } from "../catalog/types.js";
import { resolveModelsDir } from "../config/paths.js";
import type { Settings } from "../config/settings.js";
import type { InstanceFactory } from "../deployments/types.js";
import { systemFingerprint } from "../serving/fingerprint.js";
import { upstreamBackend } from "./upstream.js";

/** The embedded engine's settings for one loaded copy of a model with `sequences` sequences. */
export async function engineOptions(entry: CatalogEntry, settings: Settings, sequences: number) {
  return {
    sequences,
    contextWindow: Math.min(entry.context_length, settings.maxContext),
    fallbackChatTemplate: entry.fallback_chat_template ? await readFile(entry.fallback_chat_template, "utf8") : undefined,
    threads: settings.threads || undefined,
    shards: settings.shards || undefined,
    maxWaiting: settings.maxWaiting,
    flexMaxWaitMs: settings.flexMaxWaitMs,
    prefixCache: settings.prefixCache,
    stepTokens: settings.stepTokens,
    // Flex has no targets of its own: it runs at standard's pace.
    targets: { ...settings.targets, flex: settings.targets.standard },
  };
}

/**
 * A dedicated deployment's instance: the model (pulled or verified first) loaded into an engine of
 * its own, with max_batch_size sequences and their own KV cells and prefix cache. For a model served
 * by upstream engines, an instance is a gateway-side pool of its own over the entry's replicas (its
 * own queue and max_batch_size requests at once; the upstream's cores are shared).
 */
export function localInstanceFactory(settings: Settings): InstanceFactory {
  const modelsDir = resolveModelsDir();
  return async (entry, deployment) => {
    if (entry.backend) {
      const { backend, fingerprint } = upstreamBackend(entry, { ...entry.backend, max_concurrency: deployment.maxBatchSize }, settings);
      return { backend, systemFingerprint: fingerprint };
    }
    const [file] = await ensureModels([entry], { modelsDir, progress: false });
    if (!file) throw new Error("the model file was not pulled");
    const engine = await engineOptions(entry, settings, deployment.maxBatchSize);
    const backend = await createLocalEngineBackend({ modelPath: file.path, ...engine });
    return { backend, systemFingerprint: systemFingerprint(file.sha256, engine) };
  };
}
