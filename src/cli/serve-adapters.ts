import { adapterBaseOf, loadOnBase } from "../adapters/on-base.js";
import { ensureAdapterFile } from "../catalog/adapter-file.js";
import type { CatalogEntry, ModelFile } from "../catalog/types.js";
import type { ModelRegistry } from "../serving/model-registry.js";

/**
 * Serves each adapter entry (catalog `adapter_of`) on its base model's engine: the file checked (a
 * PEFT folder converted) against the base's GGUF, loaded once into the base's engine, and published
 * as a model of its own. An adapter whose base is not served here, or whose file fails, is marked failed.
 */
export async function loadAdapters(
  adapters: readonly CatalogEntry[],
  registry: ModelRegistry,
  baseFiles: ReadonlyMap<string, ModelFile>,
  modelsDir: string,
): Promise<void> {
  for (const entry of adapters) {
    try {
      const baseId = entry.adapter_of!;
      const base = adapterBaseOf(registry, baseId);
      const baseFile = baseFiles.get(baseId);
      if (!baseFile) throw new Error(`its base model '${baseId}' is not served by this server`);
      const file = await ensureAdapterFile(entry, { id: baseId, path: baseFile.path, sha256: baseFile.sha256 }, modelsDir);
      const { backend, systemFingerprint } = await loadOnBase(base, entry.id, file);
      registry.ready(entry.id, backend, systemFingerprint);
    } catch (error) {
      registry.failed(entry.id, (error as Error).message);
      process.stderr.write(`failed to load ${entry.id}: ${(error as Error).message}\n`);
    }
  }
}
