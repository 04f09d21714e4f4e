/**
 * A `file:` model is served from where it lies: no copy. Its sha256 is cached under the models dir, keyed by
 * path, size and mtime, so a big local model is hashed once rather than on every start.
 */
import { createHash } from "node:crypto";
import { mkdir, open, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { sha256File } from "../hash.js";
import { writeFileAtomic } from "../temp.js";

const GGUF_MAGIC = Buffer.from("GGUF", "ascii");
/** A zip's local file header: a sentence-transformers model folder to convert (catalog `convert`). */
const ZIP_MAGIC = Buffer.from([0x50, 0x4b, 0x03, 0x04]);

interface FileHashCache {
  path: string;
  size: number;
  mtimeMs: number;
  sha256: string;
}

export async function resolveLocalGguf(
  path: string,
  modelsDir: string,
  kind: "gguf" | "zip" = "gguf",
): Promise<{ path: string; bytes: number; sha256: string }> {
  const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
    throw new Error(`local file ${path} is not readable (${err.code ?? err.message})`, { cause: err });
  });
  if (!info.isFile()) throw new Error(`local path ${path} is not a file`);
  if (kind === "zip" && !(await startsWithMagic(path, ZIP_MAGIC)))
    throw new Error(`local file ${path} is not a zip of a sentence-transformers model folder`);
  if (kind === "gguf" && !(await startsWithMagic(path, GGUF_MAGIC)))
    throw new Error(`local file ${path} is not a GGUF model (it does not begin with the bytes 'GGUF')`);

  const cachePath = join(modelsDir, "file-sources", `${createHash("sha256").update(path).digest("hex").slice(0, 24)}.json`);
  const cached = await readCache(cachePath);
  if (cached && cached.path === path && cached.size === info.size && cached.mtimeMs === info.mtimeMs) {
    return { path, bytes: info.size, sha256: cached.sha256 };
  }
  const sha256 = await sha256File(path);
  // Only a speed-up: a read-only models dir must not stop a local model from being served.
  await mkdir(join(modelsDir, "file-sources"), { recursive: true })
    .then(() =>
      writeFileAtomic(
        cachePath,
        `${JSON.stringify({ path, size: info.size, mtimeMs: info.mtimeMs, sha256 } satisfies FileHashCache, null, 2)}\n`,
      ),
    )
    .catch(() => {});
  return { path, bytes: info.size, sha256 };
}

async function startsWithMagic(path: string, magic: Buffer): Promise<boolean> {
  const handle = await open(path, "r");
  try {
    const head = Buffer.alloc(magic.length);
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    return bytesRead === head.length && head.equals(magic);
  } finally {
    await handle.close();
  }
}

async function readCache(cachePath: string): Promise<FileHashCache | null> {
  try {
    return JSON.parse(await readFile(cachePath, "utf8")) as FileHashCache;
  } catch {
    return null;
  }
}
