import type { Backend } from "../backends/backend.js";
import type { EmbeddingBackend } from "../backends/embedding-backend.js";
import type { CatalogEntry } from "../catalog/types.js";
import type { ModelState } from "../protocol/models-response.js";

/** What makes a model private: the account whose dedicated deployment it is. */
export interface Dedicated {
  accountId: string;
  deploymentId: string;
  /** The catalog model the deployment runs. */
  baseModel: string;
}

/** What makes a model private: an account's uploaded LoRA adapter (`POST /v1/adapters`). */
export interface Upload {
  accountId: string;
  adapterId: string;
  /** The catalog model it runs on. */
  baseModel: string;
}

export interface ServedModel {
  entry: CatalogEntry;
  state: ModelState;
  backend?: Backend;
  /** A sentence-embedding model's engine (catalog tag `Embedding`): served by the embeddings API, never by chat. */
  embedder?: EmbeddingBackend;
  /** `system_fingerprint`: stable per model file and engine configuration (fingerprint.ts). */
  systemFingerprint?: string;
  error?: string;
  /** Present for a dedicated deployment: only that account may see or call it. */
  dedicated?: Dedicated;
  /** Present for an account's uploaded adapter: only that account may see or call it. */
  upload?: Upload;
}

/** The account a private model (a deployment, an uploaded adapter) belongs to; undefined for a public one. */
export function privateOwner(model: ServedModel): string | undefined {
  return model.dedicated?.accountId ?? model.upload?.accountId;
}

/** Whether an account may see (and call) a model: public ones, and its own deployments and adapters. */
export function visibleTo(model: ServedModel, accountId: string): boolean {
  const owner = privateOwner(model);
  return owner === undefined || owner === accountId;
}

/** The models this server publishes, and the backend serving each once it is loaded. */
export interface ModelRegistry {
  /** Each model once, under its canonical id. */
  list(): ServedModel[];
  /** The model an id or a catalog alias names. */
  get(name: string): ServedModel | undefined;
  ready(id: string, backend: Backend, systemFingerprint?: string): void;
  readyEmbedder(id: string, embedder: EmbeddingBackend): void;
  failed(id: string, error: string): void;
  notPulled(id: string): void;
  /** Adds or replaces a private model (a dedicated deployment); public ones come from the catalog. */
  putDedicated(model: ServedModel & { dedicated: Dedicated }): void;
  removeDedicated(id: string): void;
  /** Adds a private model (an uploaded adapter); its id must be no other model's. */
  putUpload(model: ServedModel & { upload: Upload }): void;
  removeUpload(id: string): void;
  /** Every public model is ready (or not pulled), and no upload is still loading; deployments do not count. */
  allReady(): boolean;
  closeAll(): Promise<void>;
}

export function createModelRegistry(entries: readonly CatalogEntry[]): ModelRegistry {
  const models = new Map<string, ServedModel>(entries.map((entry) => [entry.id, { entry, state: "loading" }]));
  // Aliases have no slash and deployments' ids do, so a deployment never takes an alias's name.
  const aliases = new Map(entries.flatMap((entry) => (entry.aliases ?? []).map((alias) => [alias, entry.id] as const)));
  const mustGet = (id: string) => {
    const model = models.get(id);
    if (!model) throw new Error(`Model ${id} is not in this registry.`);
    return model;
  };
  return {
    list: () => [...models.values()],
    get: (name) => models.get(name) ?? models.get(aliases.get(name) ?? ""),
    ready(id, backend, systemFingerprint) {
      Object.assign(mustGet(id), { state: "ready", backend, systemFingerprint, error: undefined });
    },
    readyEmbedder(id, embedder) {
      Object.assign(mustGet(id), { state: "ready", embedder, error: undefined });
    },
    failed(id, error) {
      Object.assign(mustGet(id), { state: "failed", error });
    },
    notPulled(id) {
      Object.assign(mustGet(id), { state: "not_pulled" });
    },
    putDedicated(model) {
      const existing = models.get(model.entry.id);
      if (existing && !existing.dedicated) throw new Error(`${model.entry.id} is not a deployment.`);
      models.set(model.entry.id, model);
    },
    removeDedicated(id) {
      if (models.get(id)?.dedicated) models.delete(id);
    },
    putUpload(model) {
      if (models.has(model.entry.id)) throw new Error(`${model.entry.id} is another model's id.`);
      models.set(model.entry.id, model);
    },
    removeUpload(id) {
      if (models.get(id)?.upload) models.delete(id);
    },
    // A model nobody pulled is not a model this server failed to make ready; an upload still loading at a start is not ready yet.
    allReady: () =>
      [...models.values()].every((m) =>
        m.upload ? m.state !== "loading" : m.dedicated !== undefined || m.state === "ready" || m.state === "not_pulled",
      ),
    async closeAll() {
      // Deployments' backends are their manager's to close (it meters their instances); an upload's is its base's.
      await Promise.all([...models.values()].filter((m) => privateOwner(m) === undefined).map((m) => (m.embedder ?? m.backend)?.close()));
    },
  };
}

/** The id a request's model name stands for (an alias resolved): what the ledger and the limits count under. */
export function canonicalId(registry: Pick<ModelRegistry, "get">, name: string): string {
  return registry.get(name)?.entry.id ?? name;
}

/**
 * Whether a model on this machine's cores (not an upstream engine's) has priority work running or
 * waiting: an embedding model's lower tiers then give way to it (EmbeddingQueue `giveWay`).
 */
export function localPriorityWork(registry: ModelRegistry): boolean {
  return registry.list().some((m) => {
    if (m.entry.backend || !m.backend) return false;
    const { running, waiting } = m.backend.stats();
    return running.priority + waiting.priority > 0;
  });
}
