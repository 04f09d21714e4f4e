import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe } from "node:test";
import pg from "pg";
import type { Database } from "../../src/storage/database.js";
import { migrate } from "../../src/storage/migrations.js";
import { openPgliteInDataDir } from "../../src/storage/open.js";
import { openPglite } from "../../src/storage/pglite.js";
import { openPostgres } from "../../src/storage/postgres.js";
import { keptTemplate, ROOT } from "./server.js";

/**
 * Every storage-backed test runs against both backends: embedded PGlite in a temp dir, and a fresh
 * throwaway database on the real PostgreSQL. PostgreSQL being down is a failure, never a skip.
 */
export type DatabaseKind = Database["kind"];
/**
 * `SWITCHYARD_TEST_DATABASES=pglite` (set by `npm run test:fast`, the loop that needs no services)
 * runs the PGlite variants only; `npm test` runs both, and the PostgreSQL ones fail when it is down.
 */
export const POSTGRES_TESTED = process.env.SWITCHYARD_TEST_DATABASES !== "pglite";
export const DATABASE_KINDS: readonly DatabaseKind[] = POSTGRES_TESTED ? ["pglite", "postgres"] : ["pglite"];

/** A server the tests may create and drop databases on. */
export const POSTGRES_ADMIN_URL = process.env.SWITCHYARD_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

export interface TestDatabase {
  kind: DatabaseKind;
  db: Database;
  /** PostgreSQL only: the URL of this test database, to open more connections to it. */
  url?: string;
  /** PGlite only: the directory it lives in. */
  dataDir?: string;
  /** Closes the database and deletes it (temp dir removed / database dropped). */
  dispose(): Promise<void>;
}

export interface CreateTestDatabaseOptions {
  /** Apply the service's migrations first (default true). */
  migrate?: boolean;
}

export async function createTestDatabase(kind: DatabaseKind, options: CreateTestDatabaseOptions = {}): Promise<TestDatabase> {
  const created = kind === "pglite" ? await createPgliteDatabase() : await createPostgresDatabase();
  if (options.migrate ?? true) {
    try {
      await migrate(created.db);
    } catch (error) {
      await created.dispose();
      throw error;
    }
  }
  return created;
}

/** What a suite body sees. Safe to destructure: `db` forwards to the suite's database once before() has opened it. */
export interface DatabaseSuiteContext {
  readonly kind: DatabaseKind;
  readonly db: Database;
  /** The underlying test database (url / dataDir); only inside tests and hooks. */
  readonly database: TestDatabase;
}

/**
 * Defines the suite once per backend, as `describe("<name> [pglite]")` and `[postgres]`, each with
 * its own fresh database shared by the tests inside it.
 */
export function forEachDatabase(
  name: string,
  defineTests: (context: DatabaseSuiteContext) => void,
  options: CreateTestDatabaseOptions = {},
): void {
  for (const kind of DATABASE_KINDS) {
    describe(`${name} [${kind}]`, () => {
      let opened: TestDatabase | undefined;
      const current = (): TestDatabase => {
        if (!opened) throw new Error(`The ${kind} test database is not open yet: use it inside tests or hooks.`);
        return opened;
      };
      const db: Database = {
        kind,
        query: (sql, params) => current().db.query(sql, params),
        transaction: (fn) => current().db.transaction(fn),
        close: () => current().db.close(),
      };
      before(async () => {
        opened = await createTestDatabase(kind, options);
      });
      after(async () => {
        await opened?.dispose();
      });
      defineTests({
        kind,
        db,
        get database() {
          return current();
        },
      });
    });
  }
}

/**
 * An initialized, empty PGlite cluster, kept per PGlite release: each test database starts as a
 * copy of it (opening a copy took 1.7 s where initdb took 7); the migrations still run on every copy.
 */
async function emptyPgliteCluster(): Promise<string> {
  const release = JSON.parse(readFileSync(join(ROOT, "node_modules/@electric-sql/pglite/package.json"), "utf8")) as { version: string };
  const dir = await keptTemplate(`switchyard-test-pglite-${release.version}`, async (making) => {
    await (await openPglite(join(making, "data"))).close();
  });
  return join(dir, "data");
}

/**
 * A new data dir whose embedded database is created and migrated and holds nothing, for a test that
 * opens it with `openDatabase`: a copy of one made once the way `openDatabase` makes one (initdb,
 * then the migrations), kept per migrations and PGlite release. Making one took about 6.5 s of CPU,
 * the copy and the open that follows about 1.7 s.
 */
export async function migratedDataDir(prefix: string): Promise<string> {
  const version = createHash("sha256")
    .update(readFileSync(join(ROOT, "src/storage/migrations.ts")))
    .update(readFileSync(join(ROOT, "node_modules/@electric-sql/pglite/package.json")))
    .digest("hex")
    .slice(0, 16);
  const template = await keptTemplate(`switchyard-test-migrated-${version}`, async (making) => {
    const db = await openPgliteInDataDir(join(making, "data", "db"));
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
  });
  const dataDir = await mkdtemp(join(tmpdir(), prefix));
  execFileSync("cp", ["-a", `${join(template, "data")}/.`, dataDir]); // -a: the owner-only modes come along
  return dataDir;
}

async function createPgliteDatabase(): Promise<TestDatabase> {
  const dataDir = await mkdtemp(join(tmpdir(), "switchyard-pglite-"));
  execFileSync("cp", ["-a", `${await emptyPgliteCluster()}/.`, dataDir]); // -a: the owner-only modes come along
  const db = await openPglite(dataDir);
  return {
    kind: "pglite",
    db,
    dataDir,
    async dispose() {
      await db.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function createPostgresDatabase(): Promise<TestDatabase> {
  const name = `switchyard_test_${randomBytes(6).toString("hex")}`;
  await withAdminClient((client) => client.query(`CREATE DATABASE ${name}`));
  const url = databaseUrl(name);
  let db: Database;
  try {
    db = await openPostgres(url);
  } catch (error) {
    await dropPostgresDatabase(name);
    throw error;
  }
  return {
    kind: "postgres",
    db,
    url,
    async dispose() {
      await db.close();
      await dropPostgresDatabase(name);
    },
  };
}

async function dropPostgresDatabase(name: string): Promise<void> {
  // FORCE ends connections a failed test may have left open (PostgreSQL 13+).
  await withAdminClient((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

async function withAdminClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(
      `PostgreSQL is required for these tests but ${redact(POSTGRES_ADMIN_URL)} is unreachable (${(error as Error).message}). ` +
        "Start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, " +
        "or point SWITCHYARD_TEST_POSTGRES_URL at a server where the tests may create databases.",
    );
  }
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function databaseUrl(database: string): string {
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

function redact(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = "***";
  return parsed.toString();
}

/**
 * Reads a server's database from a test: the PostgreSQL test database when there is one, else the
 * data dir's PGlite, opened for the read only (so only while no server holds it), as the server opens
 * it: what PGlite rewrites on opening is made private again after the close.
 */
export function serverDatabaseReader(dataDir: string, database: () => TestDatabase | undefined) {
  return async function withDb<T>(work: (db: Database) => Promise<T>): Promise<T> {
    const shared = database();
    if (shared) return work(shared.db);
    const db = await openPgliteInDataDir(join(dataDir, "db"));
    try {
      return await work(db);
    } finally {
      await db.close();
    }
  };
}
