import { join } from "node:path";
import { makePrivate } from "../config/data-dir-permissions.js";
import type { Database } from "./database.js";
import { migrate } from "./migrations.js";
import { openPglite } from "./pglite.js";
import { openPostgres } from "./postgres.js";
import { databaseUrl } from "../config/environment.js";

export interface OpenDatabaseOptions {
  dataDir: string;
  /** A PostgreSQL URL; falls back to SWITCHYARD_DATABASE_URL, then to embedded PGlite. */
  url?: string;
}

/** The service's database, migrated and ready: PostgreSQL when a URL is configured, else PGlite under `<dataDir>/db`. */
export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  const url = options.url ?? databaseUrl();
  const db = url ? await openPostgres(url) : await openPgliteInDataDir(join(options.dataDir, "db"));
  try {
    await migrate(db);
  } catch (error) {
    await db.close();
    throw error;
  }
  return db;
}

/**
 * PGlite creates its files with mode 0666 and its relation caches (pg_internal.init) 0644, whatever
 * the umask (see data-dir-permissions.ts): private again before opening, once open (it rewrites
 * those caches then), and after closing. Every open of a data dir's PGlite goes through here, a
 * test's read of a stopped server's ledger included.
 */
export async function openPgliteInDataDir(dir: string): Promise<Database> {
  makePrivate(dir);
  const db = await openPglite(dir);
  makePrivate(dir);
  return {
    ...db,
    async close() {
      await db.close();
      makePrivate(dir);
    },
  };
}
