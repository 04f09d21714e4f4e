/**
 * The GGUF LoRA served for an adapter entry (catalog `adapter_of`), checked against its base model's
 * GGUF: a GGUF LoRA is used where it lies; a PEFT folder is converted once into the models dir, with
 * a manifest keyed by the folder's two files and the base's hash, and re-verified on each start.
 */
import { mkdir, stat } from "node:fs/promises";
import { createHash } from "node:crypto";
import { join, resolve } from "node:path";
import { checkGgufLora } from "./convert/lora-checks.js";
import { writePeftLoraGguf } from "./convert/peft-lora.js";
import { readGgufLayout } from "./gguf/layout.js";
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
      checkGgufLora(await readGgufLayout(path), baseLayout);
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
    const written = await writePeftLoraGguf(path, { id: base.id, layout: baseLayout }, out, name);
    await writeManifest(out, { source: converted, sha256: written.sha256, bytes: written.bytes });
    return { path: out, bytes: written.bytes, sha256: written.sha256 };
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? `${(err as Error).message} (not found)` : (err as Error).message;
    throw new Error(`Cannot use adapter '${entry.id}' of '${base.id}' (${entry.source}): ${reason}`, { cause: err });
  }
}
