import { InvalidRequest } from "../errors.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import { loadOnBase, uploadEntry, type AdapterBaseModel } from "./on-base.js";

type LoadedOnBase = Awaited<ReturnType<typeof loadOnBase>>;
import type { Adapter } from "./types.js";

/**
 * The uploads this process has loaded into its engines, and the bytes their tensors take: published
 * in the registry as their accounts' private models, and unloaded again. A deleted adapter's bytes
 * count until its tensors are freed, after the requests running under it end.
 */
export class LoadedUploads {
  /** Adapter id → its bytes, while its tensors are held (a deleted one's until freed). */
  private readonly held = new Map<string, number>();
  private heldBytes = 0;

  constructor(
    private readonly registry: ModelRegistry,
    /** What every upload together may hold (AdapterLimits.loadedBytes). */
    private readonly maxBytes: number,
    private readonly log: (message: string) => void,
  ) {}

  /** Whether the adapter's tensors are loaded here (or being freed). */
  has(id: string): boolean {
    return this.held.has(id);
  }

  /** Adapters published here (not deleted): the ones a sync may find deleted by another process. */
  published(): Array<Pick<Adapter, "id" | "modelId" | "baseModel">> {
    return this.registry
      .list()
      .flatMap(({ entry, upload }) =>
        upload && this.held.has(upload.adapterId) ? [{ id: upload.adapterId, modelId: entry.id, baseModel: upload.baseModel }] : [],
      );
  }

  /**
   * Loads the adapter's file into the base's engine under the adapter's id (a key no other upload
   * ever has: the prefix cache keys KV by it); `publish` then serves it. Throws a 400 when the
   * server holds all the bytes of uploads it may, and llama.cpp's refusal as it comes.
   */
  async load(adapter: Adapter, base: AdapterBaseModel, path: string): Promise<LoadedOnBase> {
    if (this.heldBytes + adapter.bytes > this.maxBytes) {
      throw new InvalidRequest(
        `This server already holds ${this.heldBytes} bytes of uploaded adapters of the ${this.maxBytes} it may; this one needs ${adapter.bytes}. Delete an adapter, or ask the operator.`,
        null,
        "insufficient_memory",
      );
    }
    this.held.set(adapter.id, adapter.bytes);
    this.heldBytes += adapter.bytes;
    try {
      return await loadOnBase(base, adapter.id, { path, sha256: adapter.sha256 });
    } catch (error) {
      this.forget(adapter.id);
      throw error;
    }
  }

  /** Serves a loaded adapter as its account's private model: requests may name it from now. */
  publish(adapter: Adapter, base: AdapterBaseModel, served: LoadedOnBase): void {
    this.registry.removeUpload(adapter.modelId);
    this.registry.putUpload({ entry: uploadEntry(base.entry, adapter), state: "ready", ...served, upload: owner(adapter) });
  }

  /**
   * Lists an adapter not (yet) loaded, where its base is in the catalog: `loading` at a start (its
   * requests get a 503 to retry, not a 404), `failed` with the reason its owner then sees.
   */
  publishUnloaded(adapter: Adapter, state: "loading" | "failed", reason?: string): void {
    const base = this.registry.get(adapter.baseModel);
    if (!base) return;
    this.registry.removeUpload(adapter.modelId);
    if (this.registry.get(adapter.modelId)) return;
    this.registry.putUpload({ entry: uploadEntry(base.entry, adapter), state, error: reason, upload: owner(adapter) });
  }

  /**
   * Unpublishes it (requests naming it get 404 from now), then frees its tensors once the requests
   * running under it have ended. Resolves then; never throws.
   */
  async unload(adapter: Pick<Adapter, "id" | "modelId" | "baseModel">): Promise<void> {
    this.registry.removeUpload(adapter.modelId);
    if (!this.held.has(adapter.id)) return;
    try {
      await (this.registry.get(adapter.baseModel)?.backend?.removeAdapter?.(adapter.id) ?? Promise.resolve());
    } catch (error) {
      this.log(`adapter ${adapter.id}: could not be freed (${(error as Error).message})`);
    }
    this.forget(adapter.id);
  }

  private forget(id: string): void {
    this.heldBytes -= this.held.get(id) ?? 0;
    this.held.delete(id);
  }
}

const owner = (adapter: Pick<Adapter, "id" | "accountId" | "baseModel">) => ({
  accountId: adapter.accountId,
  adapterId: adapter.id,
  baseModel: adapter.baseModel,
});
