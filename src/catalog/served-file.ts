/**
 * The file actually served for a catalog entry. With `serve_format: "f16"` (the entry's, or SWITCHYARD_SERVE_FORMAT's)
 * the published GGUF is re-encoded once, at pull time, into a sibling F16 file (the same weights, in the format
 * llama.cpp's CPU kernels run fastest); the copy is cached with its own manifest, keyed by the published file's
 * hash, and re-verified like a pull.
 */
import { mkdir } from "node:fs/promises";
import { basename, join } from "node:path";
import { ensureConvertedFile, findConvertedFile } from "./convert/served-conversion.js";
import { expandToF16, hasExpandableTensors } from "./gguf/expand-f16.js";
import { findManifestedFile, findVerifiedFile, writeManifest } from "./manifest.js";
import type { CatalogEntry, ModelFile } from "./types.js";
import type { ServeFormatSetting } from "../config/environment.js";

export type { ModelFile } from "./types.js";

function formatFor(entry: CatalogEntry, setting: ServeFormatSetting): "f16" | undefined {
  return setting === "catalog" ? entry.serve_format : setting === "f16" ? "f16" : undefined;
}

const servedSource = (published: { sha256: string }) => `f16-of-sha256:${published.sha256}`;

export async function ensureServedFile(
  entry: CatalogEntry,
  published: ModelFile,
  modelDir: string,
  setting: ServeFormatSetting,
): Promise<ModelFile> {
  if (entry.convert) return ensureConvertedFile(entry, published, modelDir);
  if (formatFor(entry, setting) !== "f16") return published;
  const cached = await findVerifiedFile(modelDir, servedSource(published));
  if (cached) return { path: cached.path, bytes: cached.manifest.bytes, sha256: cached.manifest.sha256 };
  if (!(await hasExpandableTensors(published.path))) return published;
  await mkdir(modelDir, { recursive: true });
  const path = join(modelDir, `${basename(published.path).replace(/\.gguf$/i, "")}.F16.gguf`);
  const expanded = await expandToF16(published.path, path);
  await writeManifest(path, { source: servedSource(published), sha256: expanded.sha256, bytes: expanded.bytes });
  return { path, bytes: expanded.bytes, sha256: expanded.sha256 };
}

/** The served copy if it is already there (size check only, for listings). */
export async function findServedFile(
  entry: CatalogEntry,
  published: { sha256: string },
  modelDir: string,
  setting: ServeFormatSetting,
): Promise<{ path: string; bytes: number } | null> {
  if (entry.convert) return findConvertedFile(entry, published, modelDir);
  if (formatFor(entry, setting) !== "f16") return null;
  const found = await findManifestedFile(modelDir, servedSource(published));
  return found ? { path: found.path, bytes: found.manifest.bytes } : null;
}
