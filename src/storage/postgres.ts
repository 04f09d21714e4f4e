import pg from "pg";
import type { Database } from "./database.js";
import { transactionHandle } from "./scoped-transaction.js";

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/**
 * BIGINT and NUMERIC stay strings (pg's default, pinned here per pool so a global
 * `pg.types.setTypeParser` elsewhere cannot turn money into floats).
 */
const typeParsers = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === INT8_OID || oid === NUMERIC_OID) return (value: string) => value;
    return format === "binary" ? pg.types.getTypeParser(oid, "binary") : pg.types.getTypeParser(oid, "text");
  },
} as pg.CustomTypesConfig;

export interface PostgresOptions {
  /** Pool size; pg's default is 10. */
  maxConnections?: number;
}

/**
 * PostgreSQL through a connection pool. A query without params (or with an empty array) uses the
 * simple protocol, so it may hold several statements; the rows returned are the last statement's.
 */
export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<Database> {
  const pool = new pg.Pool({ connectionString: url, max: options.maxConnections, types: typeParsers });
  // An idle client that loses its connection emits 'error' on the pool; without a listener that
  // would crash the process. The pool drops the client and the next query gets a fresh one.
  pool.on("error", () => undefined);

  try {
    await pool.query("SELECT 1"); // fail at startup, not on the first request, when the URL is wrong
  } catch (error) {
    await pool.end();
    throw error;
  }

  return {
    kind: "postgres",
    async query<Row>(sql: string, params?: unknown[]) {
      return (await runStatement(pool, sql, params)) as Row[];
    },
    async transaction<T>(fn: (tx: Database) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      const handle = transactionHandle("postgres", (sql, params) => runStatement(client, sql, params));
      let brokenConnection: Error | undefined;
      try {
        await client.query("BEGIN");
        const result = await fn(handle.db);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        try {
          await client.query("ROLLBACK");
        } catch (rollbackError) {
          // The connection is unusable; tell the pool to discard it rather than reuse it.
          brokenConnection = rollbackError as Error;
        }
        throw error;
      } finally {
        handle.finish();
        client.release(brokenConnection);
      }
    },
    async close() {
      await pool.end();
    },
  };
}

async function runStatement(target: pg.Pool | pg.PoolClient, sql: string, params?: unknown[]): Promise<Record<string, unknown>[]> {
  const result = (await target.query(sql, params)) as pg.QueryResult | pg.QueryResult[];
  // Several statements in one simple-protocol query come back as one result per statement.
  if (Array.isArray(result)) return result.at(-1)?.rows ?? [];
  return result.rows;
}

export interface HeldLock {
  release(): Promise<void>;
}

/**
 * Holds a session advisory lock on a connection of its own for as long as this process lives:
 * PostgreSQL frees it when the process (and so the connection) dies, which is how other processes
 * tell a live owner from a dead one. A lost connection is reopened and the lock taken again.
 */
export async function holdAdvisoryLock(url: string, key: string, onError: (error: Error) => void = () => undefined): Promise<HeldLock> {
  let client: pg.Client | null = null;
  let released = false;
  const take = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: url, types: typeParsers });
    next.on("error", (error) => {
      onError(error);
      if (released || client !== next) return;
      client = null;
      retake();
    });
    await next.connect();
    await next.query("SELECT pg_advisory_lock($1::bigint)", [key]);
    client = next;
  };
  // Until it is held again, another process may close this one's rows as a dead owner's; its own
  // final writes then change nothing and its reservations are not charged twice (see recovery.ts).
  const retake = (): void => {
    setTimeout(
      () =>
        void take().catch((error: Error) => {
          onError(error);
          if (!released) retake();
        }),
      1000,
    ).unref();
  };
  await take();
  return {
    async release() {
      released = true;
      await client?.end().catch(() => undefined);
      client = null;
    },
  };
}
