import type { Backend } from "../backends/backend.js";
import type { CatalogEntry } from "../catalog/types.js";

/** `not_pulled`: an on-demand catalog model whose file is not in the models dir. */
export type ModelState = "loading" | "ready" | "failed" | "not_pulled";

export interface ServedModel {
  entry: CatalogEntry;
  state: ModelState;
  backend?: Backend;
  /** `system_fingerprint`: stable per model file and engine configuration (fingerprint.ts). */
  systemFingerprint?: string;
  error?: string;
}

/** The models this server publishes, and the backend serving each once it is loaded. */
export interface ModelRegistry {
  list(): ServedModel[];
  get(id: string): ServedModel | undefined;
  ready(id: string, backend: Backend, systemFingerprint?: string): void;
  failed(id: string, error: string): void;
  notPulled(id: string): void;
  allReady(): boolean;
  closeAll(): Promise<void>;
}

export function createModelRegistry(entries: readonly CatalogEntry[]): ModelRegistry {
  const models = new Map<string, ServedModel>(entries.map((entry) => [entry.id, { entry, state: "loading" }]));
  const mustGet = (id: string) => {
    const model = models.get(id);
    if (!model) throw new Error(`Model ${id} is not in this registry.`);
    return model;
  };
  return {
    list: () => [...models.values()],
    get: (id) => models.get(id),
    ready(id, backend, systemFingerprint) {
      Object.assign(mustGet(id), { state: "ready", backend, systemFingerprint, error: undefined });
    },
    failed(id, error) {
      Object.assign(mustGet(id), { state: "failed", error });
    },
    notPulled(id) {
      Object.assign(mustGet(id), { state: "not_pulled" });
    },
    // A model nobody pulled is not a model this server failed to make ready.
    allReady: () => [...models.values()].every((m) => m.state === "ready" || m.state === "not_pulled"),
    async closeAll() {
      await Promise.all([...models.values()].map((m) => m.backend?.close()));
    },
  };
}
