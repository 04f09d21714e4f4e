import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * One serving process per data dir: `<dataDir>/serve.lock` names the holder (pid, and its address
 * once it listens). Two servers on one dir would each write server.json and, on PGlite, open one
 * database twice. A lock whose process is gone (kill -9) is stale and taken over.
 */
export interface DataDirLock {
  /** Records the address the holder listens on, for the message a second server prints. */
  listening(url: string): void;
  release(): void;
}

interface LockContents {
  pid: number;
  url: string | null;
  started_at: string;
}

export class DataDirBusy extends Error {}

const LOCK_FILE = "serve.lock";

export function lockDataDir(dataDir: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, LOCK_FILE);
  const contents: LockContents = { pid: process.pid, url: null, started_at: new Date().toISOString() };
  for (let attempt = 0; attempt < 5; attempt++) {
    if (tryCreate(path, contents)) return heldLock(path, contents);
    const holder = readLock(path);
    if (holder && isServing(holder.pid)) {
      throw new DataDirBusy(
        `Another Switchyard server (pid ${holder.pid}, ${holder.url ?? "still starting"}) is using the data dir ${dataDir}. ` +
          "Stop it first, or give this server its own --data-dir; servers that should share accounts and usage share one PostgreSQL " +
          "(SWITCHYARD_DATABASE_URL), each with its own data dir.",
      );
    }
    // Stale (its process is gone) or unreadable: out of the way, then try again.
    rmSync(path, { force: true });
  }
  throw new DataDirBusy(`Could not take the lock ${path}; another server may be starting on the same data dir.`);
}

/** Creates the lock file complete or not at all: written aside, then hard-linked into place (fails if it exists). */
function tryCreate(path: string, contents: LockContents): boolean {
  const temporary = `${path}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(contents)}\n`, { mode: 0o600 });
  try {
    linkSync(temporary, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    rmSync(temporary, { force: true });
  }
}

function heldLock(path: string, contents: LockContents): DataDirLock {
  return {
    listening(url) {
      const temporary = `${path}.${process.pid}.tmp`;
      writeFileSync(temporary, `${JSON.stringify({ ...contents, url })}\n`, { mode: 0o600 });
      renameSync(temporary, path);
    },
    release() {
      if (readLock(path)?.pid === process.pid) rmSync(path, { force: true });
    },
  };
}

function readLock(path: string): LockContents | null {
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as Partial<LockContents>;
    return Number.isInteger(parsed.pid) ? { pid: parsed.pid!, url: parsed.url ?? null, started_at: parsed.started_at ?? "" } : null;
  } catch {
    return null;
  }
}

/**
 * Whether `pid` is a live Switchyard process. On Linux its command line is checked too, so a pid
 * reused by an unrelated process after a crash does not hold the data dir forever.
 */
function isServing(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("switchyard");
  } catch {
    return true; // no /proc: a live pid is taken at its word
  }
}

/** The live server holding the data dir's lock (perhaps still starting), or null. */
export function liveLockHolder(dataDir: string): { pid: number; url: string | null } | null {
  const holder = readLock(join(dataDir, LOCK_FILE));
  return holder && isServing(holder.pid) ? { pid: holder.pid, url: holder.url } : null;
}
