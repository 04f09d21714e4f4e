/**
 * The adapters API's implementation: an upload is read into a temp dir under the data dir, checked
 * (and a PEFT folder converted) against its base model by the catalog's adapter code, kept as
 * `<data dir>/adapters/<id>.lora.gguf`, loaded into the base's engine, recorded, then published as its
 * account's private model. Conversions run one at a time: each holds an adapter's tensors in memory.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { prepareUploadedAdapter } from "../catalog/adapter-file.js";
import { AdapterConfigError } from "../catalog/convert/peft-lora.js";
import type { ModelFile } from "../catalog/types.js";
import { CapacityUnavailable, InvalidRequest, ServiceError } from "../errors.js";
import type { FormPart } from "../protocol/form-parts.js";
import { PRIVATE_MODEL_NAME } from "../protocol/identifiers.js";
import { privateOwner, type ModelRegistry } from "../serving/model-registry.js";
import { allowedFor } from "../serving/served-model.js";
import type { Database } from "../storage/database.js";
import { SerialQueue } from "../storage/serial-queue.js";
import { checkAccountRoom, findAdapter, insertAdapter, listAdapters, markDeleted, newAdapterId } from "./adapter-store.js";
import { LoadedUploads } from "./loaded-uploads.js";
import { whyNotAdaptable, type AdapterBaseModel } from "./on-base.js";
import { receiveUpload, type ReceivedUpload } from "./receive-upload.js";
import { adapterPath, keptHere, reloadAdapters, sweepAdapterFiles, syncDeleted } from "./reload.js";
import { DEFAULT_ADAPTER_LIMITS, type Adapter, type AdapterCaller, type AdapterLimits, type AdapterService } from "./types.js";

export interface AdapterManagerOptions {
  db: Database;
  registry: ModelRegistry;
  /** `<data dir>/adapters`: the served files, and tmp/ for uploads being read. */
  dir: string;
  limits?: AdapterLimits;
  /** Counts an upload against the key's request rate and budget (throws the 429 or 402). */
  admit(caller: AdapterCaller): Promise<void>;
  log(message: string): void;
  /** How often a process sharing PostgreSQL looks for its adapters deleted through another (default 10 s). */
  syncMs?: number;
}

export interface AdapterManager extends AdapterService {
  /** Before the base models load: every live upload kept here is listed as loading (its requests get a 503 to retry, not a 404). */
  announce(): Promise<void>;
  /** Once the base models have loaded (their files given): sweeps what a stopped server left, reloads every live upload kept here. */
  start(baseFiles: ReadonlyMap<string, ModelFile>): Promise<void>;
  close(): void;
}

export function createAdapterManager(options: AdapterManagerOptions): AdapterManager {
  return new Adapters(options);
}

class Adapters implements AdapterManager {
  private readonly db: Database;
  private readonly registry: ModelRegistry;
  private readonly limits: AdapterLimits;
  private readonly loaded: LoadedUploads;
  private readonly conversions = new SerialQueue();
  private baseFiles: ReadonlyMap<string, ModelFile> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: AdapterManagerOptions) {
    ({ db: this.db, registry: this.registry } = options);
    this.limits = options.limits ?? DEFAULT_ADAPTER_LIMITS;
    this.loaded = new LoadedUploads(this.registry, this.limits.loadedBytes, options.log);
  }

  async announce(): Promise<void> {
    for (const { adapter } of await keptHere(this.db, this.options.dir)) this.loaded.publishUnloaded(adapter, "loading");
  }

  async start(baseFiles: ReadonlyMap<string, ModelFile>): Promise<void> {
    const { dir, log } = this.options;
    await rm(join(dir, "tmp"), { recursive: true, force: true });
    await mkdir(join(dir, "tmp"), { recursive: true, mode: 0o700 });
    await sweepAdapterFiles(this.db, dir, log);
    await reloadAdapters({ db: this.db, registry: this.registry, loaded: this.loaded, dir, baseFiles, log });
    this.baseFiles = baseFiles;
    // On PGlite this process is the only one: every delete comes through it.
    if (this.db.kind !== "postgres") return;
    this.timer = setInterval(() => {
      syncDeleted(this.db, this.loaded, dir).catch((error: Error) => log(`adapters: ${error.message}`));
    }, this.options.syncMs ?? 10_000);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  async upload(caller: AdapterCaller, parts: AsyncIterable<FormPart>): Promise<Adapter> {
    if (!this.baseFiles) throw new CapacityUnavailable("The server is still loading its models; retry the upload shortly.", 5);
    await this.options.admit(caller);
    // The count before any of the body is read; the name once it is known; both again when the row is written.
    await checkAccountRoom(this.db, caller.accountId, null, this.limits);
    const tmp = await mkdtemp(join(this.options.dir, "tmp", "upload-"));
    try {
      const received = await receiveUpload(parts, tmp, this.limits.maxBytes, (field, value) =>
        field === "name" ? checkName(value) : this.baseFor(caller, value),
      );
      const base = this.baseFor(caller, received.baseModel);
      const modelId = `${caller.accountName}/${received.name}`;
      if (this.registry.get(modelId)) throw nameTaken(received.name);
      await checkAccountRoom(this.db, caller.accountId, received.name, this.limits);
      return await this.conversions.run(() => this.keep(caller, received, base));
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }

  list(caller: Parameters<AdapterService["list"]>[0]): Promise<Adapter[]> {
    return listAdapters(this.db, caller.accountId);
  }

  get(caller: Parameters<AdapterService["get"]>[0], id: string): Promise<Adapter | null> {
    return findAdapter(this.db, id, caller.accountId);
  }

  async remove(caller: AdapterCaller, id: string): Promise<Adapter | null> {
    const adapter = await markDeleted(this.db, caller.accountId, id);
    if (!adapter) return null;
    // Unpublished before this returns; freed, and its file removed, once its last request ends.
    void this.loaded.unload(adapter).then(() => rm(adapterPath(this.options.dir, adapter.id), { force: true }));
    return adapter;
  }

  /** Converts (or checks) the upload into its served file, loads it, records it, publishes it; on any failure nothing stays. */
  private async keep(caller: AdapterCaller, received: ReceivedUpload, base: AdapterBaseModel): Promise<Adapter> {
    const id = newAdapterId();
    const path = adapterPath(this.options.dir, id);
    const baseId = base.entry.id;
    const fileParam = received.format === "peft" ? "adapter_model" : "adapter_gguf";
    try {
      const baseFile = this.baseFiles?.get(baseId);
      if (!baseFile) throw new CapacityUnavailable(`The model '${baseId}' is not loaded on this server; retry shortly.`, 5);
      const file = await prepareUploadedAdapter(received.upload, { id: baseId, ...baseFile }, path, received.name).catch((error: Error) => {
        throw invalidAdapter(baseId, error, fileParam);
      });
      const { name, format } = received;
      const adapter = { id, accountId: caller.accountId, name, modelId: `${caller.accountName}/${name}`, baseModel: baseId, format };
      const kept: Adapter = {
        ...adapter,
        bytes: file.bytes,
        sha256: file.sha256,
        status: "ready",
        failReason: null,
        createdAt: new Date(),
      };
      const served = await this.loaded.load(kept, base, path).catch((error: Error) => {
        throw error instanceof ServiceError ? error : invalidAdapter(baseId, error, fileParam);
      });
      try {
        const inserted = await insertAdapter(this.db, kept, this.limits);
        this.loaded.publish(inserted, base, served);
        return inserted;
      } catch (error) {
        await this.loaded.unload(kept);
        throw error;
      }
    } catch (error) {
      await rm(path, { force: true });
      throw error;
    }
  }

  /**
   * The catalog model named as `base_model` (id or alias), served here on an engine that takes
   * adapters. One the key may not use, and another account's private model, are the same 404 as a
   * model that does not exist.
   */
  private baseFor(caller: AdapterCaller, name: string): AdapterBaseModel {
    const base = this.registry.get(name);
    if (!base || privateOwner(base) !== undefined || !allowedFor(caller.allowedModels, base)) {
      const shown = name.length > 64 ? `${name.slice(0, 64)}...` : name;
      throw new ServiceError(
        404,
        "invalid_request_error",
        `The model '${shown}' does not exist or you do not have access to it.`,
        "model_not_found",
        "base_model",
      );
    }
    const why = whyNotAdaptable(base);
    if (why) throw new InvalidRequest(`The model '${base.entry.id}' cannot carry an adapter: ${why}.`, "base_model", "model_not_adaptable");
    if (base.state !== "ready" || !this.baseFiles?.has(base.entry.id))
      throw new CapacityUnavailable(`The model '${base.entry.id}' is not loaded on this server (${base.state}); retry later.`, 30);
    return base as AdapterBaseModel;
  }
}

function checkName(name: string): void {
  if (!PRIVATE_MODEL_NAME.test(name))
    throw new InvalidRequest(
      "An adapter name is 1-64 characters: letters, digits, '.', '_' or '-', starting with a letter or digit.",
      "name",
      "invalid_value",
    );
}

const nameTaken = (name: string) =>
  new ServiceError(
    409,
    "invalid_request_error",
    `The model id for the name '${name}' is already taken; choose another name.`,
    "name_taken",
    "name",
  );

/** The checker's or converter's reason, as the caller's 400 naming the file at fault: nothing of the upload was kept. */
const invalidAdapter = (baseId: string, error: Error, param: string) =>
  error instanceof ServiceError
    ? error
    : new InvalidRequest(
        `The adapter cannot be used with '${baseId}': ${error.message}`,
        error instanceof AdapterConfigError ? "adapter_config" : param,
        "invalid_adapter",
      );
