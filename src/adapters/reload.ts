/**
 * Uploads across restarts: at start every live adapter whose file lies in this data dir is checked
 * and loaded again (one that fails is marked failed, and the server goes on); files of adapters
 * deleted (or never recorded: a server stopped mid-upload) go. With several server processes on one
 * PostgreSQL database, each keeps the uploads it took; a delete through another is seen at the next sync.
 */
import { access, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { recheckAdapterFile } from "../catalog/adapter-file.js";
import { sha256File } from "../catalog/hash.js";
import type { ModelFile } from "../catalog/types.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import type { Database } from "../storage/database.js";
import { goneAdapterIds, listAdapters, setStatus } from "./adapter-store.js";
import type { LoadedUploads } from "./loaded-uploads.js";
import { adapterBaseOf } from "./on-base.js";
import type { Adapter } from "./types.js";

const SUFFIX = ".lora.gguf";

/** Where an upload's served GGUF LoRA lies. */
export const adapterPath = (dir: string, id: string) => join(dir, `${id}${SUFFIX}`);

/** Removes the files of adapters that are deleted or were never recorded. */
export async function sweepAdapterFiles(db: Database, dir: string, log: (message: string) => void): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const ids = names.filter((name) => name.endsWith(SUFFIX)).map((name) => name.slice(0, -SUFFIX.length));
  const gone = await goneAdapterIds(db, ids);
  await Promise.all(gone.map((id) => rm(adapterPath(dir, id), { force: true })));
  if (gone.length > 0) log(`removed the files of ${gone.length} deleted adapter(s)`);
}

export interface ReloadContext {
  db: Database;
  registry: ModelRegistry;
  loaded: LoadedUploads;
  dir: string;
  baseFiles: ReadonlyMap<string, ModelFile>;
  log: (message: string) => void;
}

/**
 * The live uploads this process serves, with whether their file is here: on PostgreSQL another
 * server's data dir may hold one (it is left to that server); on PGlite nothing else can.
 */
export async function keptHere(db: Database, dir: string): Promise<Array<{ adapter: Adapter; here: boolean }>> {
  const kept = await Promise.all(
    (await listAdapters(db)).map(async (adapter) => ({
      adapter,
      here: await access(adapterPath(dir, adapter.id)).then(
        () => true,
        () => false,
      ),
    })),
  );
  return kept.filter(({ here }) => here || db.kind !== "postgres");
}

/** Loads every live upload kept in this data dir again, one at a time. */
export async function reloadAdapters(context: ReloadContext): Promise<void> {
  for (const { adapter, here } of await keptHere(context.db, context.dir)) {
    const path = adapterPath(context.dir, adapter.id);
    try {
      if (!here) throw new Error("its file is missing from the data dir");
      await reloadOne(context, adapter, path);
      if (adapter.status !== "ready") await setStatus(context.db, adapter.id, "ready", null);
    } catch (error) {
      const reason = (error as Error).message;
      context.log(`adapter ${adapter.id} (${adapter.modelId}) could not be loaded again: ${reason}`);
      await setStatus(context.db, adapter.id, "failed", reason);
      context.loaded.publishUnloaded(adapter, "failed", reason);
    }
  }
}

async function reloadOne({ registry, loaded, baseFiles }: ReloadContext, adapter: Adapter, path: string): Promise<void> {
  const base = adapterBaseOf(registry, adapter.baseModel);
  const baseFile = baseFiles.get(adapter.baseModel);
  if (!baseFile) throw new Error(`its base model '${adapter.baseModel}' is not served by this server`);
  // The file is the one converted at upload, and still fits the base as it is now (a catalog update may have changed it).
  const sha256 = await sha256File(path);
  if (sha256 !== adapter.sha256) throw new Error(`its file changed since it was uploaded (sha256 ${sha256}, not ${adapter.sha256})`);
  await recheckAdapterFile(path, baseFile.path);
  loaded.publish(adapter, base, await loaded.load(adapter, base, path));
}

/** The adapters loaded here that another process deleted: unpublished now, freed and their files removed once idle. */
export async function syncDeleted(db: Database, loaded: LoadedUploads, dir: string): Promise<void> {
  const published = loaded.published();
  const gone = new Set(
    await goneAdapterIds(
      db,
      published.map((a) => a.id),
    ),
  );
  for (const adapter of published.filter((a) => gone.has(a.id)))
    void loaded.unload(adapter).then(() => rm(adapterPath(dir, adapter.id), { force: true }));
}
