/**
 * The one small interface every store in the service talks to. Two implementations: embedded PGlite
 * (default, a directory under the data dir) and PostgreSQL (when a URL is given). Same SQL dialect,
 * same migrations.
 */
export interface Database {
  query<Row = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<Row[]>;
  /** Runs fn inside one transaction; the transaction-scoped Database must be used for every statement in it. */
  transaction<T>(fn: (tx: Database) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  readonly kind: "pglite" | "postgres";
}
