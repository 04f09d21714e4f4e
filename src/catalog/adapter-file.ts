/**
 * The GGUF LoRA served for an adapter entry (catalog `adapter_of`), checked against its base model's
 * GGUF: a GGUF LoRA is used where it lies; a PEFT folder is converted once into the models dir, with
 * a manifest keyed by the folder's two files and the base's hash, and re-verified on each start.
 * An account's upload (`POST /v1/adapters`) goes through the same checks and conversion.
 */
import { mkdir, rename, stat } from "node:fs/promises";
import { createHash } from "node:crypto";
import { join, resolve } from "node:path";
import { checkGgufLora, checkGgufTensorData } from "./convert/lora-checks.js";
import { writePeftLoraGguf } from "./convert/peft-lora.js";
import { runUploadJob } from "./convert/upload-thread.js";
import { readGgufLayout, type GgufLayout } from "./gguf/layout.js";
import { sha256File } from "./hash.js";
import { findVerifiedFile, writeManifest } from "./manifest.js";
import { modelDirName } from "./pull.js";
import { requireSource } from "./source.js";
import { resolveLocalGguf } from "./sources/file.js";
import type { CatalogEntry, ModelFile } from "./types.js";

/** The base model as loaded: its catalog id and GGUF. */
export interface AdapterBase {
  id: string;
  path: string;
  sha256: string;
}

export async function ensureAdapterFile(entry: CatalogEntry, base: AdapterBase, modelsDir: string): Promise<ModelFile> {
  const source = requireSource(entry.id, entry.source);
  if (source.kind !== "file") throw new Error(`adapter '${entry.id}' needs a 'file:' source`);
  const path = resolve(source.path);
  try {
    const info = await stat(path);
    const baseLayout = await readGgufLayout(base.path);
    if (!info.isDirectory()) {
      const file = await resolveLocalGguf(path, resolve(modelsDir));
      await checkGgufAdapter(path, baseLayout);
      return file;
    }
    const [config, weights] = await Promise.all(["adapter_config.json", "adapter_model.safetensors"].map((f) => sha256File(join(path, f))));
    const key = createHash("sha256").update(`${config}:${weights}:${base.sha256}`).digest("hex");
    const converted = `peft-lora-of-sha256:${key}`;
    const modelDir = join(resolve(modelsDir), modelDirName(entry.id));
    const cached = await findVerifiedFile(modelDir, converted);
    if (cached) return { path: cached.path, bytes: cached.manifest.bytes, sha256: cached.manifest.sha256 };
    await mkdir(modelDir, { recursive: true });
    const name = entry.id.split("/").pop()!;
    const out = join(modelDir, `${name}.lora.gguf`);
    const written = await convertPeftAdapter(path, { id: base.id, layout: baseLayout }, out, name);
    await writeManifest(out, { source: converted, sha256: written.sha256, bytes: written.bytes });
    return written;
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? `${(err as Error).message} (not found)` : (err as Error).message;
    throw new Error(`Cannot use adapter '${entry.id}' of '${base.id}' (${entry.source}): ${reason}`, { cause: err });
  }
}

/** What an account uploads as an adapter: a PEFT folder's two files in `dir`, or one GGUF LoRA. */
export type AdapterUpload = { format: "peft"; dir: string } | { format: "gguf"; path: string };

/**
 * An uploaded adapter made servable at `out`: a PEFT folder converted, a GGUF LoRA checked and moved
 * there; each checked against the base's GGUF as a catalog adapter is. Throws with the reason.
 */
export async function prepareUploadedAdapter(upload: AdapterUpload, base: AdapterBase, out: string, name: string): Promise<ModelFile> {
  if (upload.format === "peft") {
    const written = await runUploadJob({ kind: "peft", dir: upload.dir, baseId: base.id, basePath: base.path, out, name });
    return { path: out, ...written! };
  }
  await runUploadJob({ kind: "gguf", path: upload.path, basePath: base.path });
  await rename(upload.path, out);
  const { size } = await stat(out);
  return { path: out, bytes: size, sha256: await sha256File(out) };
}

/** A served upload's GGUF checked again at a start, against the base's GGUF as it is now (throws with the reason). */
export async function recheckAdapterFile(path: string, basePath: string): Promise<void> {
  await runUploadJob({ kind: "gguf", path, basePath });
}

/** A GGUF LoRA that fits the base: its kind, architecture and shapes, and every tensor's data inside the file. */
async function checkGgufAdapter(path: string, baseLayout: GgufLayout): Promise<void> {
  const layout = await readGgufLayout(path);
  checkGgufLora(layout, baseLayout);
  checkGgufTensorData(layout);
}

async function convertPeftAdapter(dir: string, base: { id: string; layout: GgufLayout }, out: string, name: string): Promise<ModelFile> {
  const written = await writePeftLoraGguf(dir, base, out, name);
  return { path: out, bytes: written.bytes, sha256: written.sha256 };
}
