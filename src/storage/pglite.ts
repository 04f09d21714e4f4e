import { AsyncLocalStorage } from "node:async_hooks";
import { mkdir } from "node:fs/promises";
import { PGlite, types, type Transaction } from "@electric-sql/pglite";
import type { Database } from "./database.js";
import { SerialQueue } from "./serial-queue.js";
import { transactionHandle } from "./scoped-transaction.js";
import { preparedStatements, type PreparedStatements } from "./pglite-statements.js";

/**
 * BIGINT and NUMERIC come back as strings, as they do from `pg`: money and token counts are never
 * floats in this project, and both backends must hand callers the same types.
 */
const pgliteParsers = {
  [types.INT8]: (value: string) => value,
  [types.NUMERIC]: (value: string) => value,
};

/**
 * Embedded PostgreSQL (PGlite) persisted in `dir`. Only one process may open a given dir at a time.
 *
 * PGlite is a single connection, so every top-level statement and every whole transaction runs
 * through one FIFO queue. A query without params (or with an empty array) uses the simple protocol,
 * as `pg` does, so it may hold several statements; the rows returned are the last statement's. One
 * with params runs as a named prepared statement (pglite-statements.ts), planned once.
 */
export async function openPglite(dir: string): Promise<Database> {
  await mkdir(dir, { recursive: true });
  const pglite = await PGlite.create(dir, { parsers: pgliteParsers });
  const queue = new SerialQueue();
  const statements = preparedStatements(pglite);
  // Marks async work that runs inside one of this database's transactions. Reaching for the outer
  // handle from there would wait behind the very transaction that is waiting on it: a silent hang.
  // Work merely started from inside a transaction (a timer, say) may use the outer handle once the
  // transaction is over, hence the flag rather than mere presence of the store.
  const insideTransaction = new AsyncLocalStorage<{ active: boolean }>();

  const assertNotInsideTransaction = () => {
    if (insideTransaction.getStore()?.active) {
      throw new Error("Use the transaction's own Database handle inside transaction(); the outer one would deadlock on PGlite.");
    }
  };

  return {
    kind: "pglite",
    async query<Row>(sql: string, params?: unknown[]) {
      assertNotInsideTransaction();
      return (await queue.run(() => runStatement(pglite, statements, sql, params))) as Row[];
    },
    async transaction<T>(fn: (tx: Database) => Promise<T>): Promise<T> {
      assertNotInsideTransaction();
      return queue.run(() =>
        pglite.transaction(async (pgliteTx) => {
          const handle = transactionHandle("pglite", (sql, params) => runStatement(pgliteTx, statements, sql, params));
          const scope = { active: true };
          try {
            return await insideTransaction.run(scope, () => fn(handle.db));
          } finally {
            scope.active = false;
            handle.finish();
          }
        }),
      );
    },
    async close() {
      // Queued behind in-flight work, so nothing is cut off halfway.
      await queue.run(() => pglite.close());
    },
  };
}

/** How long statements may run back to back before the event loop gets a turn. */
const SLICE_MS = 4;
/** A pause this long since the last statement ended starts a new slice (the loop was free to turn meanwhile). */
const GAP_MS = 1;
let sliceStart = 0;
let lastEnd = 0;

/**
 * PGlite runs a statement synchronously on this thread and answers through promises alone, so a
 * loop of statements (a file's chunks, a batch's lines) would never let the event loop turn: every
 * other request, `/health` included, would wait for the whole loop. Once statements have run back
 * to back for a few milliseconds, the next one first waits one turn of the event loop.
 */
async function shareTheLoop(): Promise<void> {
  const now = performance.now();
  if (now - lastEnd > GAP_MS) sliceStart = now;
  else if (now - sliceStart >= SLICE_MS) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    sliceStart = performance.now();
  }
}

/** `target` runs the simple protocol's statements; prepared ones share the connection, in or out of a transaction. */
async function runStatement(
  target: PGlite | Transaction,
  statements: PreparedStatements,
  sql: string,
  params?: unknown[],
): Promise<Record<string, unknown>[]> {
  await shareTheLoop();
  try {
    if (params && params.length > 0) return await statements.run(sql, params);
    const results = await target.exec(sql);
    return (results.at(-1)?.rows ?? []) as Record<string, unknown>[];
  } finally {
    lastEnd = performance.now();
  }
}
