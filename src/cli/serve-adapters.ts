import { adapterBackend } from "../backends/adapter-backend.js";
import { ensureAdapterFile } from "../catalog/adapter-file.js";
import type { CatalogEntry, ModelFile } from "../catalog/types.js";
import { systemFingerprint } from "../serving/fingerprint.js";
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
      const base = registry.get(baseId);
      const baseFile = baseFiles.get(baseId);
      if (!base?.backend || base.state !== "ready" || !baseFile) throw new Error(`its base model '${baseId}' is not served by this server`);
      if (!base.backend.addAdapter) throw new Error(`its base model '${baseId}' runs on an engine that takes no adapters`);
      const file = await ensureAdapterFile(entry, { id: baseId, path: baseFile.path, sha256: baseFile.sha256 }, modelsDir);
      await base.backend.addAdapter(entry.id, file.path);
      const fingerprint = systemFingerprint(file.sha256, { base: base.systemFingerprint });
      registry.ready(entry.id, adapterBackend(base.backend, entry.id), fingerprint);
    } catch (error) {
      registry.failed(entry.id, (error as Error).message);
      process.stderr.write(`failed to load ${entry.id}: ${(error as Error).message}\n`);
    }
  }
}
