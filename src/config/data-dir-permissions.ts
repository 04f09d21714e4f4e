import { chmodSync, existsSync, lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * The data dir holds stored conversations, key hashes and budgets: only its owner may read or
 * write it. The CLI runs with umask 077, so what this process creates is private; but PGlite
 * (Emscripten's file system) gives each file it creates mode 0666, and its relation caches
 * (pg_internal.init) 0644, whatever the umask, so the modes are also fixed here, at start and after
 * the database is closed. While it runs, the data dir's own 0700 already keeps every other user out
 * of everything below it.
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_UMASK = 0o077;

/** Makes `path` and everything under it private (dirs 0700, files 0600); returns how many modes changed. Symlinks are left alone. */
export function makePrivate(path: string): number {
  if (!existsSync(path)) return 0;
  let changed = 0;
  const visit = (at: string) => {
    const stat = lstatSync(at);
    if (stat.isSymbolicLink()) return;
    const wanted = stat.isDirectory() ? PRIVATE_DIR_MODE : PRIVATE_FILE_MODE;
    if ((stat.mode & 0o7777) !== wanted) {
      chmodSync(at, wanted);
      changed++;
    }
    if (stat.isDirectory()) for (const name of readdirSync(at)) visit(join(at, name));
  };
  visit(path);
  return changed;
}
