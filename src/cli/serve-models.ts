import { createLocalEngineBackend } from "../backends/local-engine.js";
import { ensureModels, findPulledModel } from "../catalog/pull.js";
import type { CatalogEntry, ModelFile } from "../catalog/types.js";
import { resolveModelsDir } from "../config/paths.js";
import type { Settings } from "../config/settings.js";
import { systemFingerprint } from "../serving/fingerprint.js";
import { loadAdapters } from "./serve-adapters.js";
import { localPriorityWork, type ModelRegistry } from "../serving/model-registry.js";
import { createLocalEmbeddingBackend } from "../backends/embedding-backend.js";
import { engineOptions } from "./instance-factory.js";
import { upstreamBackend } from "./upstream.js";

/** The catalog entries `SWITCHYARD_MODELS` names (all when it names none); an unknown id stops the start. */
export function selectModels(catalog: CatalogEntry[], ids: string[]): CatalogEntry[] {
  if (ids.length === 0) return catalog;
  const unknown = ids.filter((id) => !catalog.some((m) => m.id === id));
  if (unknown.length > 0) throw new Error(`Not in the catalog: ${unknown.join(", ")}`);
  return catalog.filter((m) => ids.includes(m.id));
}

/** Loads the catalog's models and adapters; returns the GGUF of each model served on the local engine (what adapters are checked against). */
export async function loadModels(
  catalog: CatalogEntry[],
  registry: ModelRegistry,
  settings: Settings,
): Promise<ReadonlyMap<string, ModelFile>> {
  // An on-demand model is served only once someone has pulled it (`switchyard models pull <id>`).
  const modelsDir = resolveModelsDir();
  const absent = await Promise.all(
    catalog.map(async (entry) => entry.pull === "on_demand" && (await findPulledModel(entry, modelsDir)) === null),
  );
  const toLoad = catalog.filter((entry, i) => !absent[i] && entry.adapter_of === undefined);
  catalog.filter((_, i) => absent[i]).forEach((entry) => registry.notPulled(entry.id));
  const files = new Map<string, ModelFile>();
  for (const entry of toLoad) {
    try {
      if (entry.backend) {
        const { backend, fingerprint } = upstreamBackend(entry, entry.backend, settings);
        registry.ready(entry.id, backend, fingerprint);
        continue;
      }
      // One model at a time: a file that fails to pull or verify marks that model failed, not the server.
      const [file] = await ensureModels([entry], { modelsDir, progress: true });
      if (!file) throw new Error("the model file was not pulled");
      if (entry.tags.includes("Embedding")) {
        const embedder = await createLocalEmbeddingBackend({
          modelPath: file.path,
          threads: settings.threads || undefined,
          shards: settings.shards || undefined,
          giveWay: () => localPriorityWork(registry),
        });
        registry.readyEmbedder(entry.id, embedder);
        continue;
      }
      const adapted = catalog.some((adapter) => adapter.adapter_of === entry.id);
      const adapterRoom = settings.adapterRoom === "on" || (settings.adapterRoom === "auto" && adapted);
      // Only where room is on, so other models' fingerprints stay as they were.
      const engine = { ...(await engineOptions(entry, settings, settings.parallel)), ...(adapterRoom ? { adapterRoom } : {}) };
      const backend = await createLocalEngineBackend({ modelPath: file.path, ...engine });
      registry.ready(entry.id, backend, systemFingerprint(file.sha256, engine));
      files.set(entry.id, file);
    } catch (error) {
      registry.failed(entry.id, (error as Error).message);
      process.stderr.write(`failed to load ${entry.id}: ${(error as Error).message}\n`);
    }
  }
  await loadAdapters(
    catalog.filter((entry) => entry.adapter_of !== undefined),
    registry,
    files,
    modelsDir,
  );
  return files;
}
