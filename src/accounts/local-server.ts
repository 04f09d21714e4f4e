import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { adminKey, processEnvironment } from "../config/environment.js";

/**
 * A running server announces itself in `<dataDir>/server.json` (mode 0600: it holds the admin
 * token). PGlite cannot be opened by two processes, so CLI commands on the same data dir find the
 * server here and go through its admin API instead of opening the database themselves.
 */
export interface LocalServer {
  url: string;
  adminToken: string;
}

interface ServerFile extends LocalServer {
  pid: number;
}

const SERVER_FILE = "server.json";

export function serverFilePath(dataDir: string): string {
  return join(dataDir, SERVER_FILE);
}

/** A fresh random admin token for one server run. */
export function generateAdminToken(): string {
  return `sy-admin-${randomBytes(32).toString("base64url")}`;
}

/** The admin token in force: the operator's SWITCHYARD_ADMIN_KEY if set, else a fresh random one. */
export function resolveAdminToken(env: NodeJS.ProcessEnv = processEnvironment()): string {
  return adminKey(env) ?? generateAdminToken();
}

export function writeServerFile(dataDir: string, server: LocalServer): void {
  mkdirSync(dataDir, { recursive: true });
  const contents: ServerFile = { pid: process.pid, url: server.url, adminToken: server.adminToken };
  // Write then rename, so a reader never sees a half-written file; the temp file is 0600 from birth.
  const temporary = `${serverFilePath(dataDir)}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(contents, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, serverFilePath(dataDir));
}

/** Removes the file if this process wrote it, so a stopping server never deletes another's. */
export function removeServerFile(dataDir: string): void {
  const current = readServerFile(dataDir);
  if (current === null || current.pid === process.pid) rmSync(serverFilePath(dataDir), { force: true });
}

/** The server running on this data dir, or null when there is none (a stale file is ignored). */
export function findLiveServer(dataDir: string): LocalServer | null {
  const server = readServerFile(dataDir);
  if (server === null || !isProcessAlive(server.pid)) return null;
  return { url: server.url, adminToken: server.adminToken };
}

function readServerFile(dataDir: string): ServerFile | null {
  let text: string;
  try {
    text = readFileSync(serverFilePath(dataDir), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as Partial<ServerFile>;
    if (
      Number.isInteger(parsed.pid) &&
      (parsed.pid as number) > 0 &&
      typeof parsed.url === "string" &&
      typeof parsed.adminToken === "string"
    ) {
      return { pid: parsed.pid as number, url: parsed.url, adminToken: parsed.adminToken };
    }
  } catch {
    // A corrupt file is treated like a missing one.
  }
  return null;
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to another user; it still holds the data dir.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
