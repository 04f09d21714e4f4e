/** Temp-file conventions: a partial file never carries its final name, so a crash cannot leave a bad model behind. */
import { randomBytes } from "node:crypto";
import { readdir, rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/** A hidden, unique sibling of `finalPath` on the same filesystem, so the final rename is atomic. */
export function tempPathBeside(finalPath: string): string {
  return join(dirname(finalPath), `.${basename(finalPath)}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`);
}

export async function removeQuietly(path: string): Promise<void> {
  await rm(path, { force: true }).catch(() => {});
}

export async function writeFileAtomic(path: string, contents: string | Buffer): Promise<void> {
  const temp = tempPathBeside(path);
  try {
    await writeFile(temp, contents);
    await rename(temp, path);
  } finally {
    await removeQuietly(temp);
  }
}

/** `.NAME.PID-HEX.tmp`, as tempPathBeside names them. */
const TEMP_NAME = /^\..+\.(\d+)-[0-9a-f]{8}\.tmp$/;

/**
 * Deletes the temp files in `dir` left by a pull whose process is gone (killed mid-download): a
 * live process's temp files, a concurrent pull's, are left alone. A missing dir is fine.
 */
export async function removeStaleTemps(dir: string): Promise<string[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of names) {
    const pid = Number(TEMP_NAME.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isInteger(pid) || isAlive(pid)) continue;
    await removeQuietly(join(dir, name));
    removed.push(name);
  }
  return removed;
}

function isAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
