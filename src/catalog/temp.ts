/** Temp-file conventions: a partial file never carries its final name, so a crash cannot leave a bad model behind. */
import { randomBytes } from "node:crypto";
import { rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/** A hidden, unique sibling of `finalPath` on the same filesystem, so the final rename is atomic. */
export function tempPathBeside(finalPath: string): string {
  return join(dirname(finalPath), `.${basename(finalPath)}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`);
}

export async function removeQuietly(path: string): Promise<void> {
  await rm(path, { force: true }).catch(() => {});
}

export async function writeFileAtomic(path: string, contents: string): Promise<void> {
  const temp = tempPathBeside(path);
  try {
    await writeFile(temp, contents);
    await rename(temp, path);
  } finally {
    await removeQuietly(temp);
  }
}
