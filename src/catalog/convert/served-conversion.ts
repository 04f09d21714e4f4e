/**
 * The GGUF served for a converted entry (catalog `convert`): written once from the published zip, beside
 * it, with its own manifest keyed by the zip's sha256 and the precision; re-verified on each start like
 * a pull, and written again when the zip or the precision changes. A mean-pooling BERT gets its fp32
 * ONNX graph beside it the same way (ONNX Runtime runs it; the GGUF still tokenizes).
 */
import { createHash } from "node:crypto";
import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { findManifestedFile, findVerifiedFile, writeManifest } from "../manifest.js";
import type { ModelFile } from "../types.js";
import type { CatalogEntry } from "../types.js";
import { conversionLayout, writeBertGguf, type BertPrecision } from "./bert-gguf.js";
import { BERT_ONNX_LAYOUT, encodeBertOnnx } from "./bert-onnx.js";
import { readSentenceTransformersZip, type SentenceTransformersModel } from "./sentence-transformers.js";
import { writeFileAtomic } from "../temp.js";

const convertedSource = (entry: CatalogEntry, published: { sha256: string }) =>
  `bert-gguf-${conversionLayout(entry.precision as BertPrecision)}-of-sha256:${published.sha256}`;

/** fp32: the int8 graphs measured missed the fidelity floor (docs/api/embeddings.md). */
const onnxSource = (published: { sha256: string }) => `bert-onnx-${BERT_ONNX_LAYOUT}-of-sha256:${published.sha256}`;

export async function ensureConvertedFile(entry: CatalogEntry, published: ModelFile, modelDir: string): Promise<ModelFile> {
  const source = convertedSource(entry, published);
  const name = entry.id.split("/").pop()!;
  let model: SentenceTransformersModel | undefined;
  const readModel = async () => (model ??= await readSentenceTransformersZip(published.path));
  const cached = await findVerifiedFile(modelDir, source);
  const gguf = cached
    ? { path: cached.path, bytes: cached.manifest.bytes, sha256: cached.manifest.sha256 }
    : await writeGgufOf(await readModel(), entry, modelDir, name, source);
  const onnxPath = await ensureOnnxFile(readModel, published, modelDir, name);
  return onnxPath ? { ...gguf, onnxPath } : gguf;
}

async function writeGgufOf(model: SentenceTransformersModel, entry: CatalogEntry, modelDir: string, name: string, source: string) {
  const precision = entry.precision as BertPrecision;
  const path = join(modelDir, `${name}.${precision.toUpperCase()}.gguf`);
  await mkdir(modelDir, { recursive: true }); // a `file:` source has no folder of its own yet
  const written = await writeBertGguf(model, path, name, precision);
  await writeManifest(path, { source, sha256: written.sha256, bytes: written.bytes });
  return { path, bytes: written.bytes, sha256: written.sha256 };
}

/** The ONNX graph's path, written if it is not there; none for a model the graph does not cover (not mean pooling). */
async function ensureOnnxFile(
  readModel: () => Promise<SentenceTransformersModel>,
  published: ModelFile,
  modelDir: string,
  name: string,
): Promise<string | undefined> {
  const cached = await findVerifiedFile(modelDir, onnxSource(published));
  if (cached) return cached.path;
  const model = await readModel();
  if (model.pooling !== "mean") return undefined;
  const path = join(modelDir, `${name}.${BERT_ONNX_LAYOUT}.onnx`);
  const bytes = encodeBertOnnx(model, "fp32");
  await removeOtherLayouts(modelDir, name, path);
  await writeFileAtomic(path, bytes);
  await writeManifest(path, {
    source: onnxSource(published),
    sha256: createHash("sha256").update(bytes).digest("hex"),
    bytes: bytes.length,
  });
  return path;
}

/** An earlier layout's graph, manifest and verification mark (`<name>.<layout>.onnx[.json|.verified]`): 90 MB no build of this one reads. */
async function removeOtherLayouts(modelDir: string, name: string, current: string): Promise<void> {
  const stale = (await readdir(modelDir)).filter(
    (file) => file.startsWith(`${name}.`) && /\.onnx(\.[a-z]+)?$/.test(file) && !join(modelDir, file).startsWith(current),
  );
  await Promise.all(stale.map((file) => rm(join(modelDir, file), { force: true })));
}

export async function findConvertedFile(
  entry: CatalogEntry,
  published: { sha256: string },
  modelDir: string,
): Promise<{ path: string; bytes: number } | null> {
  const found = await findManifestedFile(modelDir, convertedSource(entry, published));
  return found ? { path: found.path, bytes: found.manifest.bytes } : null;
}
