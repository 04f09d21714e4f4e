import { AsyncLocalStorage } from "node:async_hooks";
import { mkdir } from "node:fs/promises";
import { Worker } from "node:worker_threads";
import type { Database } from "./database.js";
import type { PgliteReply, PgliteRequest } from "./pglite-worker.js";
import { transactionHandle } from "./scoped-transaction.js";

const FROM_SOURCE = import.meta.url.endsWith(".ts");
const WORKER_URL = new URL(`./pglite-worker${FROM_SOURCE ? ".ts" : ".js"}`, import.meta.url);

/** A request to the database thread, without the id the connection gives it. */
type Ask = PgliteRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;
type Answer = { db?: number; rows?: Record<string, unknown>[]; tx?: number };

/**
 * Embedded PostgreSQL (PGlite) persisted in `dir`, run on the process's database thread
 * (pglite-worker.ts) so that its statements, synchronous WebAssembly, never hold the event loop.
 * Only one process may open a given dir at a time.
 *
 * PGlite is a single connection: the thread runs every top-level statement and every whole
 * transaction in FIFO order. A query without params (or with an empty array) uses the simple
 * protocol, as `pg` does, so it may hold several statements; the rows returned are the last
 * statement's. One with params runs as a named prepared statement (pglite-statements.ts), planned once.
 */
export async function openPglite(dir: string): Promise<Database> {
  await mkdir(dir, { recursive: true });
  const thread = await databaseThread();
  const { db: id } = await thread.ask({ kind: "open", dir });
  const db = id!;
  // Marks async work that runs inside one of this database's transactions. Reaching for the outer
  // handle from there would wait behind the very transaction that is waiting on it: a silent hang.
  // Work merely started from inside a transaction (a timer, say) may use the outer handle once the
  // transaction is over, hence the flag rather than mere presence of the store.
  // A check for the code's authors, made where it runs from source (the tests, development): on
  // Node 20 an AsyncLocalStorage, once used, runs a hook on every promise the process makes (4% of
  // the gateway's main thread while it streamed, 3% of an embedding server's), which the compiled
  // server does not pay for a mistake the tests would have caught.
  const insideTransaction = FROM_SOURCE ? new AsyncLocalStorage<{ active: boolean }>() : undefined;

  const assertNotInsideTransaction = () => {
    if (insideTransaction?.getStore()?.active) {
      throw new Error("Use the transaction's own Database handle inside transaction(); the outer one would deadlock on PGlite.");
    }
  };

  return {
    kind: "pglite",
    async query<Row>(sql: string, params?: unknown[]) {
      assertNotInsideTransaction();
      return (await thread.ask({ kind: "run", db, tx: null, sql, params })).rows as Row[];
    },
    async transaction<T>(fn: (tx: Database) => Promise<T>): Promise<T> {
      assertNotInsideTransaction();
      const tx = (await thread.ask({ kind: "begin", db })).tx!;
      const handle = transactionHandle("pglite", async (sql, params) => (await thread.ask({ kind: "run", db, tx, sql, params })).rows!);
      const end = (commit: boolean) => thread.ask({ kind: "end", db, tx, commit }).finally(() => handle.finish());
      const scope = { active: true };
      let result: T;
      try {
        result = await (insideTransaction ? insideTransaction.run(scope, () => fn(handle.db)) : fn(handle.db));
      } catch (error) {
        // The callback's error is the one to see, even if the rollback fails too.
        await end(false).catch(() => {});
        throw error;
      } finally {
        scope.active = false;
      }
      await end(true);
      return result;
    },
    async close() {
      // Queued behind in-flight work, so nothing is cut off halfway.
      await thread.ask({ kind: "close", db });
    },
  };
}

interface DatabaseThread {
  ask(request: Ask): Promise<Answer>;
}

let shared: Promise<DatabaseThread> | null = null;

/** The process's database thread, started on first use; a thread that died is replaced on the next open. */
function databaseThread(): Promise<DatabaseThread> {
  shared ??= startThread(() => (shared = null));
  return shared;
}

/**
 * Starts the database thread. It keeps the process alive only while statements are outstanding, as
 * a socket to PostgreSQL would: a command that forgets to close its database still exits.
 */
function startThread(onDeath: () => void): Promise<DatabaseThread> {
  const options = { name: "switchyard-pglite" };
  // Run from source (tests), the thread loads the TypeScript through tsx's API: Node 20 does not
  // carry the `--import tsx` loader into worker threads.
  const worker = FROM_SOURCE
    ? new Worker(
        `import("tsx/esm/api").then((tsx) => tsx.tsImport(${JSON.stringify(WORKER_URL.href)}, ${JSON.stringify(import.meta.url)}))`,
        {
          ...options,
          eval: true,
        },
      )
    : new Worker(WORKER_URL, options);
  const pending = new Map<number, { resolve: (reply: Answer) => void; reject: (error: Error) => void }>();
  let nextId = 0;
  let dead: Error | null = null;
  const ask = (request: Ask): Promise<Answer> => {
    if (dead) return Promise.reject(dead);
    const id = ++nextId;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      if (pending.size === 1) worker.ref();
      worker.postMessage({ id, ...request } as PgliteRequest);
    });
  };
  const die = (error: Error) => {
    dead ??= error;
    onDeath();
    for (const waiter of pending.values()) waiter.reject(error);
    pending.clear();
    worker.unref();
  };
  return new Promise<DatabaseThread>((ready, failed) => {
    worker.on("message", (message: PgliteReply | { ready: true }) => {
      if ("ready" in message) {
        worker.unref();
        return ready({ ask });
      }
      const waiter = pending.get(message.id);
      pending.delete(message.id);
      if (pending.size === 0) worker.unref();
      if ("error" in message) waiter?.reject(rebuilt(message.error));
      else waiter?.resolve(message);
    });
    worker.on("error", (error) => {
      failed(error);
      die(error);
    });
    worker.on("exit", (code) => {
      const error = new Error(`The embedded database's thread exited (code ${code}).`);
      failed(error);
      die(error);
    });
  });
}

/** An error from the database thread as the caller would have caught it there: its message and fields (code, detail, ...). */
function rebuilt({ message, fields }: { message: string; fields: Record<string, unknown> }): Error {
  return Object.assign(new Error(message), fields);
}
