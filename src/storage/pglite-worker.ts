/**
 * The embedded database's own thread. PGlite runs every statement synchronously (PostgreSQL
 * compiled to WebAssembly) and answers only through promises, so on the main thread each statement
 * held the event loop for its whole run: a request's in-flight row (1-2 ms) stood between admission
 * and the upstream call or the first token, and every settle paused every other stream. Here the
 * statements run beside the event loop; the main thread only posts and receives messages
 * (pglite.ts). One thread per process serves every database the process opens (PGlite's module is
 * loaded and compiled once).
 *
 * Each database is one PGlite connection, so one FIFO queue: a top-level statement, or a whole
 * transaction from its BEGIN to its COMMIT, runs at a time.
 */
import { parentPort, type MessagePort } from "node:worker_threads";
import { PGlite, types, type Transaction } from "@electric-sql/pglite";
import { preparedStatements, type PreparedStatements } from "./pglite-statements.js";
import { SerialQueue } from "./serial-queue.js";

/** What the main thread asks, of database `db`: open one, a statement (`tx`: inside that open transaction), a transaction's start or end, or the close. */
export type PgliteRequest =
  | { id: number; kind: "open"; dir: string }
  | { id: number; kind: "run"; db: number; tx: number | null; sql: string; params: unknown[] | undefined }
  | { id: number; kind: "begin"; db: number }
  | { id: number; kind: "end"; db: number; tx: number; commit: boolean }
  | { id: number; kind: "close"; db: number };

/** `db` for an opened database, `rows` for a statement, `tx` for a begun transaction; `error` as its own fields (a DatabaseError's code, detail, ...). */
export type PgliteReply =
  | { id: number; db?: number; rows?: Record<string, unknown>[]; tx?: number }
  | { id: number; error: { message: string; fields: Record<string, unknown> } };

/**
 * BIGINT and NUMERIC come back as strings, as they do from `pg`: money and token counts are never
 * floats in this project, and both backends must hand callers the same types.
 */
const pgliteParsers = {
  [types.INT8]: (value: string) => value,
  [types.NUMERIC]: (value: string) => value,
};

/** A transaction the main thread has begun: its PGlite handle, and how it ends. */
interface OpenTransaction {
  handle: Transaction;
  /** Resolves PGlite's transaction callback: commit, or roll back. */
  end: (commit: boolean) => void;
  /** Settles once PGlite has committed or rolled back. */
  ended: Promise<void>;
}

/** Thrown inside PGlite's transaction callback to make it roll back. */
class RollBack extends Error {}

/** One open database: its connection, its prepared statements, its queue and its open transactions. */
interface Instance {
  pglite: PGlite;
  statements: PreparedStatements;
  queue: SerialQueue;
  transactions: Map<number, OpenTransaction>;
}

function serve(port: MessagePort): void {
  const instances = new Map<number, Instance>();
  let nextDb = 0;
  let nextTx = 0;
  const answer = (id: number, work: () => Promise<Omit<PgliteReply, "id">>) =>
    work().then(
      (result) => port.postMessage({ id, ...result }),
      (error: unknown) => port.postMessage({ id, error: errorFields(error) }),
    );
  const instanceOf = (db: number) => {
    const found = instances.get(db);
    if (!found) throw new Error(`No open database ${db}.`);
    return found;
  };
  const openTransaction = (instance: Instance, tx: number) => {
    const found = instance.transactions.get(tx);
    if (!found) throw new Error(`No open transaction ${tx}.`);
    return found;
  };

  port.on("message", (request: PgliteRequest) => {
    switch (request.kind) {
      case "open":
        return void answer(request.id, async () => {
          const pglite = await PGlite.create(request.dir, { parsers: pgliteParsers });
          const db = ++nextDb;
          instances.set(db, { pglite, statements: preparedStatements(pglite), queue: new SerialQueue(), transactions: new Map() });
          return { db };
        });
      case "run":
        return void answer(request.id, async () => {
          const instance = instanceOf(request.db);
          const { tx, sql, params } = request;
          // Inside a transaction the statement runs at once: the queue is held by the transaction itself.
          if (tx !== null) return { rows: await runStatement(openTransaction(instance, tx).handle, instance.statements, sql, params) };
          return { rows: await instance.queue.run(() => runStatement(instance.pglite, instance.statements, sql, params)) };
        });
      case "begin":
        return void answer(request.id, async () => ({ tx: await begin(instanceOf(request.db), ++nextTx) }));
      case "end":
        return void answer(request.id, async () => {
          const instance = instanceOf(request.db);
          const transaction = openTransaction(instance, request.tx);
          instance.transactions.delete(request.tx);
          transaction.end(request.commit);
          await transaction.ended;
          return {};
        });
      case "close":
        return void answer(request.id, async () => {
          const instance = instanceOf(request.db);
          // Queued behind the work under way, so nothing is cut off halfway.
          await instance.queue.run(() => instance.pglite.close());
          instances.delete(request.db);
          return {};
        });
    }
  });
  port.postMessage({ ready: true });
}

/** Waits for the database's queue, opens a PGlite transaction and holds it (and the queue) until its end message. */
function begin(instance: Instance, tx: number): Promise<number> {
  return new Promise<number>((begun, failed) => {
    let end!: (commit: boolean) => void;
    const committing = new Promise<boolean>((resolve) => (end = resolve));
    const ran = instance.queue.run(() =>
      instance.pglite.transaction(async (handle) => {
        instance.transactions.set(tx, { handle, end, ended });
        begun(tx);
        if (!(await committing)) throw new RollBack();
      }),
    );
    const ended = ran.then(
      () => undefined,
      (error: unknown) => {
        if (!(error instanceof RollBack)) throw error;
      },
    );
    // A BEGIN that fails never opens: its error answers the begin.
    ended.catch(failed);
  });
}

/** `target` runs the simple protocol's statements; prepared ones share the connection, in or out of a transaction. */
async function runStatement(
  target: PGlite | Transaction,
  statements: PreparedStatements,
  sql: string,
  params: unknown[] | undefined,
): Promise<Record<string, unknown>[]> {
  if (params && params.length > 0) return statements.run(sql, params);
  const results = await target.exec(sql);
  return (results.at(-1)?.rows ?? []) as Record<string, unknown>[];
}

/** An error as the main thread rebuilds it: its message and its own fields (PostgreSQL's code, detail, constraint, ...). */
function errorFields(error: unknown): { message: string; fields: Record<string, unknown> } {
  if (!(error instanceof Error)) return { message: String(error), fields: {} };
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error))
    if (value === null || ["string", "number", "boolean"].includes(typeof value)) fields[key] = value;
  return { message: error.message, fields };
}

if (parentPort) serve(parentPort);
