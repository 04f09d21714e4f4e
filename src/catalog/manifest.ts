/**
 * The manifest written next to each pulled GGUF (`<file>.gguf.json`). It records which catalog source the file
 * came from and the hash it had when verified, so a later start can check the cache without the network.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { sha256File } from "./hash.js";
import { removeQuietly, writeFileAtomic } from "./temp.js";

export interface PullManifest {
  source: string;
  sha256: string;
  bytes: number;
}

export function manifestPathFor(ggufPath: string): string {
  return `${ggufPath}.json`;
}

export async function writeManifest(ggufPath: string, manifest: PullManifest): Promise<void> {
  await writeFileAtomic(manifestPathFor(ggufPath), `${JSON.stringify(manifest, null, 2)}\n`);
}

async function readManifest(path: string): Promise<PullManifest | null> {
  try {
    const parsed = JSON.parse(await readFile(path, "utf8")) as Partial<PullManifest>;
    if (typeof parsed.source !== "string" || typeof parsed.sha256 !== "string" || typeof parsed.bytes !== "number") return null;
    return { source: parsed.source, sha256: parsed.sha256, bytes: parsed.bytes };
  } catch {
    return null;
  }
}

interface ManifestedFile {
  path: string;
  manifestPath: string;
  manifest: PullManifest;
}

/** Every GGUF in `modelDir` whose manifest says it came from `source` (normally one). */
async function manifestedFiles(modelDir: string, source: string): Promise<ManifestedFile[]> {
  const names = await readdir(modelDir).catch(() => [] as string[]);
  const found: ManifestedFile[] = [];
  // GGUFs, the zipped model folders that are converted to GGUF (catalog `convert`), and the ONNX graphs written beside them.
  for (const name of names.filter((n) => n.endsWith(".gguf.json") || n.endsWith(".zip.json") || n.endsWith(".onnx.json")).sort()) {
    const manifestPath = join(modelDir, name);
    const manifest = await readManifest(manifestPath);
    if (manifest?.source === source) found.push({ path: manifestPath.slice(0, -".json".length), manifestPath, manifest });
  }
  return found;
}

async function sizeOf(path: string): Promise<number> {
  return stat(path).then(
    (s) => s.size,
    () => -1,
  );
}

/** The GGUF pulled for `source`, judged by size only: cheap enough for listings, not a verification. */
export async function findManifestedFile(modelDir: string, source: string): Promise<{ path: string; manifest: PullManifest } | null> {
  for (const file of await manifestedFiles(modelDir, source)) {
    if ((await sizeOf(file.path)) === file.manifest.bytes) return file;
  }
  return null;
}

/**
 * The GGUF pulled for `source`, re-hashed against its manifest. A file that fails (truncated, corrupted)
 * is deleted together with its manifest, so the caller pulls it again.
 */
export async function findVerifiedFile(modelDir: string, source: string): Promise<{ path: string; manifest: PullManifest } | null> {
  for (const file of await manifestedFiles(modelDir, source)) {
    if ((await sizeOf(file.path)) === file.manifest.bytes && (await hashMatches(file.path, file.manifest.sha256))) return file;
    await removeQuietly(file.path);
    await removeQuietly(file.manifestPath);
  }
  return null;
}

/** The file's identity when it last hashed to its manifest's sha256 (`<file>.verified`). */
interface VerifiedStamp {
  sha256: string;
  bytes: number;
  mtimeMs: number;
  ino: number;
}

/**
 * Whether the file hashes to `sha256`. Hashing every cached model on every start and test run took
 * seconds a file, so a file whose size, mtime and inode are what they were when it last hashed right
 * is not hashed again; any difference, or a stamp that cannot be read, hashes it.
 */
async function hashMatches(path: string, sha256: string): Promise<boolean> {
  const stampPath = `${path}.verified`;
  const info = await stat(path);
  const now: VerifiedStamp = { sha256, bytes: info.size, mtimeMs: info.mtimeMs, ino: info.ino };
  const stamp = await readFile(stampPath, "utf8").then(
    (text) => JSON.parse(text) as VerifiedStamp,
    () => null,
  );
  if (stamp && stamp.sha256 === now.sha256 && stamp.bytes === now.bytes && stamp.mtimeMs === now.mtimeMs && stamp.ino === now.ino)
    return true;
  await removeQuietly(stampPath);
  if ((await sha256File(path)) !== sha256) return false;
  await writeFileAtomic(stampPath, JSON.stringify(now));
  return true;
}
