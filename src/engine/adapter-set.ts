import type { Shard } from "./core/shard.js";
import type { EngineRequest } from "./core/request.js";
import type { StepGate } from "./core/step-gate.js";
import type { LoadedModel } from "./native/loaded-model.js";

/** How often a removed adapter looks whether its last request has ended. */
const RELEASE_CHECK_MS = 100;

/**
 * The LoRA adapters loaded into one model, under the keys requests name them by. Loading and
 * freeing change llama.cpp's list of the model's adapters, which its contexts read inside a decode,
 * so both wait for the model's step gate. A removed adapter takes no new request at once; its
 * tensors are freed once no request holds it (running, waiting or preempted: they finish under it)
 * and every shard's context has let go of it.
 */
export class LoadedAdapters {
  private readonly handles = new Map<string, bigint>();
  private readonly loading = new Map<string, Promise<void>>();
  private closed = false;

  constructor(
    private readonly model: Pick<LoadedModel, "loadAdapter" | "freeAdapter">,
    private readonly gate: StepGate,
    /** The model's shards (none until they have started). */
    private readonly shards: () => readonly Shard[],
  ) {}

  /** The llama.cpp handle of the adapter loaded under `key`. */
  get(key: string): bigint | undefined {
    return this.handles.get(key);
  }

  /** Loads before any shard runs (the host's start): no step can be in flight. */
  addNow(key: string, path: string): void {
    if (!this.handles.has(key)) this.handles.set(key, this.model.loadAdapter(path));
  }

  /** Loads the adapter under `key` (a key already loaded is left as it is); throws if llama.cpp refuses it. */
  add(key: string, path: string): Promise<void> {
    if (this.handles.has(key)) return Promise.resolve();
    let loading = this.loading.get(key);
    if (!loading) {
      loading = this.gate
        .exclusive(() => {
          if (this.closed) throw new Error("the model is closing");
          this.handles.set(key, this.model.loadAdapter(path));
        })
        .finally(() => this.loading.delete(key));
      this.loading.set(key, loading);
    }
    return loading;
  }

  /** Takes no new request under `key` now; resolves once its tensors are freed (or the model closed first). */
  async remove(key: string): Promise<void> {
    await this.loading.get(key)?.catch(() => {});
    const handle = this.handles.get(key);
    if (handle === undefined) return;
    this.handles.delete(key);
    while (!this.closed && this.inUse(handle)) await new Promise((resolve) => setTimeout(resolve, RELEASE_CHECK_MS));
    await this.gate.exclusive(async () => {
      if (this.closed) return; // the model's free frees it
      // A shard whose runner died never decodes again: its context's pointer is never followed.
      await Promise.allSettled(this.shards().map((shard) => shard.dropAdapter(handle)));
      this.model.freeAdapter(handle);
    });
  }

  /** Before the model is freed: no change runs after this, and pending removals leave their adapters to the model's free. */
  async close(): Promise<void> {
    this.closed = true;
    await this.gate.exclusive(() => {});
  }

  private inUse(handle: bigint): boolean {
    const holds = (request: EngineRequest): boolean => request.adapter?.handle === handle || request.siblings.some(holds);
    return this.shards().some(({ scheduler }) => scheduler.running.some(holds) || scheduler.waiting.some(holds));
  }
}
