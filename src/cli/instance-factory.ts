import { readFile } from "node:fs/promises";
import { createLocalEngineBackend } from "../backends/local-engine.js";
import { ensureModels, findPulledModel } from "../catalog/pull.js";
import type { CatalogEntry } from "../catalog/types.js";
import { resolveModelsDir } from "../config/paths.js";
import type { Settings } from "../config/settings.js";
import { readKvShape } from "../deployments/gguf-shape.js";
import { instanceBytes } from "../deployments/memory-guard.js";
import type { InstanceFactory, InstanceSizer } from "../deployments/types.js";
import { systemFingerprint } from "../serving/fingerprint.js";
import { upstreamBackend } from "./upstream.js";

/** The embedded engine's settings for one loaded copy of a model with `sequences` sequences. */
export async function engineOptions(entry: CatalogEntry, settings: Settings, sequences: number, contextLength: number | null = null) {
  return {
    sequences,
    contextWindow: contextWindowOf(entry, settings, contextLength),
    fallbackChatTemplate: entry.fallback_chat_template ? await readFile(entry.fallback_chat_template, "utf8") : undefined,
    threads: settings.threads || undefined,
    shards: settings.shards || undefined,
    maxWaiting: settings.maxWaiting,
    flexMaxWaitMs: settings.flexMaxWaitMs,
    stallTimeoutMs: settings.stallTimeoutMs,
    pausedPreemptMs: settings.streamPauseGraceMs,
    prefixCache: settings.prefixCache,
    speculation: settings.speculation,
    stepTokens: settings.stepTokens,
    // The one place the settings' `standard` (SWITCHYARD_STANDARD_*) becomes the default tier; flex and
    // batch have no targets of their own and run at its pace.
    targets: {
      priority: settings.targets.priority,
      default: settings.targets.standard,
      flex: settings.targets.standard,
      batch: settings.targets.standard,
    },
  };
}

/** Tokens one request may hold, and so KV cells per sequence: a deployment's own context_length may only lower it. */
function contextWindowOf(entry: CatalogEntry, settings: Settings, contextLength: number | null): number {
  return Math.min(entry.context_length, settings.maxContext, contextLength ?? Infinity);
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
    const engine = await engineOptions(entry, settings, deployment.maxBatchSize, deployment.contextLength);
    const backend = await createLocalEngineBackend({ modelPath: file.path, ...engine });
    return { backend, systemFingerprint: systemFingerprint(file.sha256, engine) };
  };
}

/**
 * An instance's memory: the pulled GGUF's size plus KV for max_batch_size sequences of the context
 * window engineOptions gives it (see deployments/memory-guard.ts). A model not pulled yet is sized when
 * its instance loads (the factory pulls it first); an upstream model takes no memory here.
 */
export function localInstanceSizer(settings: Settings): InstanceSizer {
  const modelsDir = resolveModelsDir();
  return async (entry, deployment) => {
    if (entry.backend) return 0;
    const file = await findPulledModel(entry, modelsDir);
    if (!file) return 0;
    const shape = await readKvShape(file.path);
    return instanceBytes({
      fileBytes: file.bytes,
      shape,
      sequences: deployment.maxBatchSize,
      cellsPerSequence: contextWindowOf(entry, settings, deployment.contextLength),
    });
  };
}
