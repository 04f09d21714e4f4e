/**
 * The embedded database's own thread. PGlite runs every statement synchronously (PostgreSQL
 * compiled to WebAssembly) and answers only through promises, so on the main thread each statement
 * held the event loop for its whole run: a request's in-flight row (1-2 ms) stood between admission
 * and the upstream call or the first token, and every settle paused every other stream. Here the
 * statements run beside the event loop; the main thread only posts and receives messages
 * (pglite.ts).
 *
 * One PGlite connection, so one FIFO queue: a top-level statement, or a whole transaction from its
 * BEGIN to its COMMIT, runs at a time.
 */
import { parentPort, workerData, type MessagePort } from "node:worker_threads";
import { PGlite, types, type Transaction } from "@electric-sql/pglite";
import { preparedStatements, type PreparedStatements } from "./pglite-statements.js";
import { SerialQueue } from "./serial-queue.js";

export interface PgliteWorkerData {
  dir: string;
}

/** What the main thread asks: a statement (`tx`: inside that open transaction), a transaction's start or end, or the close. */
export type PgliteRequest =
  | { id: number; kind: "run"; tx: number | null; sql: string; params: unknown[] | undefined }
  | { id: number; kind: "begin" }
  | { id: number; kind: "end"; tx: number; commit: boolean }
  | { id: number; kind: "close" };

/** `rows` for a statement, `tx` for a begun transaction; `error` as its own fields (a DatabaseError's code, detail, ...). */
export type PgliteReply =
  | { id: number; rows?: Record<string, unknown>[]; tx?: number }
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

async function serve(port: MessagePort, { dir }: PgliteWorkerData): Promise<void> {
  const pglite = await PGlite.create(dir, { parsers: pgliteParsers });
  const statements = preparedStatements(pglite);
  const queue = new SerialQueue();
  const open = new Map<number, OpenTransaction>();
  let nextTx = 0;
  const answer = (id: number, work: () => Promise<Omit<PgliteReply, "id">>) =>
    work().then(
      (result) => port.postMessage({ id, ...result }),
      (error: unknown) => port.postMessage({ id, error: errorFields(error) }),
    );
  const openTransaction = (tx: number) => {
    const found = open.get(tx);
    if (!found) throw new Error(`No open transaction ${tx}.`);
    return found;
  };

  port.on("message", (request: PgliteRequest) => {
    switch (request.kind) {
      case "run": {
        const { tx, sql, params } = request;
        // Inside a transaction the statement runs at once: the queue is held by the transaction itself.
        if (tx !== null)
          return void answer(request.id, async () => ({ rows: await runStatement(openTransaction(tx).handle, statements, sql, params) }));
        return void answer(request.id, async () => ({ rows: await queue.run(() => runStatement(pglite, statements, sql, params)) }));
      }
      case "begin":
        return void answer(request.id, async () => ({ tx: await begin(++nextTx) }));
      case "end":
        return void answer(request.id, async () => {
          const transaction = openTransaction(request.tx);
          open.delete(request.tx);
          transaction.end(request.commit);
          await transaction.ended;
          return {};
        });
      case "close":
        return void answer(request.id, async () => {
          await queue.run(() => pglite.close());
          return {};
        });
    }
  });

  /** Waits for the queue, opens a PGlite transaction and holds it (and the queue) until its end message. */
  function begin(tx: number): Promise<number> {
    return new Promise<number>((begun, failed) => {
      let end!: (commit: boolean) => void;
      const committing = new Promise<boolean>((resolve) => (end = resolve));
      const ran = queue.run(() =>
        pglite.transaction(async (handle) => {
          open.set(tx, { handle, end, ended });
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
  port.postMessage({ ready: true });
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

if (parentPort) {
  const port = parentPort;
  serve(port, workerData as PgliteWorkerData).catch((error: unknown) => {
    port.postMessage({ failed: errorFields(error) });
  });
}
