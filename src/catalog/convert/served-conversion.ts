/**
 * The GGUF served for a converted entry (catalog `convert`): written once from the published zip, beside
 * it, with its own manifest keyed by the zip's sha256 and the precision; re-verified on each start like
 * a pull, and written again when the zip or the precision changes.
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { findManifestedFile, findVerifiedFile, writeManifest } from "../manifest.js";
import type { ModelFile } from "../types.js";
import type { CatalogEntry } from "../types.js";
import { conversionLayout, writeBertGguf, type BertPrecision } from "./bert-gguf.js";
import { readSentenceTransformersZip } from "./sentence-transformers.js";

const convertedSource = (entry: CatalogEntry, published: { sha256: string }) =>
  `bert-gguf-${conversionLayout(entry.precision as BertPrecision)}-of-sha256:${published.sha256}`;

export async function ensureConvertedFile(entry: CatalogEntry, published: ModelFile, modelDir: string): Promise<ModelFile> {
  const source = convertedSource(entry, published);
  const cached = await findVerifiedFile(modelDir, source);
  if (cached) return { path: cached.path, bytes: cached.manifest.bytes, sha256: cached.manifest.sha256 };
  const precision = entry.precision as BertPrecision;
  const name = entry.id.split("/").pop()!;
  const path = join(modelDir, `${name}.${precision.toUpperCase()}.gguf`);
  const model = await readSentenceTransformersZip(published.path);
  await mkdir(modelDir, { recursive: true }); // a `file:` source has no folder of its own yet
  const written = await writeBertGguf(model, path, name, precision);
  await writeManifest(path, { source, sha256: written.sha256, bytes: written.bytes });
  return { path, bytes: written.bytes, sha256: written.sha256 };
}

export async function findConvertedFile(
  entry: CatalogEntry,
  published: { sha256: string },
  modelDir: string,
): Promise<{ path: string; bytes: number } | null> {
  const found = await findManifestedFile(modelDir, convertedSource(entry, published));
  return found ? { path: found.path, bytes: found.manifest.bytes } : null;
}
