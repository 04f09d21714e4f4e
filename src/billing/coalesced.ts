/**
 * Group commit for the ledger's per-request writes. Under load many requests write their rows at
 * once; each statement has a fixed cost (parse, plan, commit; on PGlite, a turn of its one database
 * thread), so rows that arrive while a write is under way go together in the next one.
 * Alone, a row is written on the event loop's next turn: nothing waits to be batched, but what the
 * current turn was doing goes first. A row written beside a launch (`afterMs`) waits a moment more:
 * the launch's own messages (to the engine, or an upstream request through undici) leave over
 * several turns, and the statement's message to the database thread, which on a busy core
 * preempts this one, held them up (undici's request → its headers on the socket: 0.37 ms p50
 * with the row on the next turn, 0.08 ms with it 2 ms later; the gateway pinned to one core).
 */

/** Rows written per statement at most (17 columns each stays far below PostgreSQL's 65,535 parameters). */
const MAX_ROWS = 256;

interface Pending<I, R> {
  item: I;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

/**
 * `writeMany` writes its items in one statement and returns one result per item, in order. A batch
 * that fails is written again item by item, so one bad row (or a deadlock between two processes'
 * batches on PostgreSQL) fails only its own request.
 */
export function coalesced<I, R>(
  writeMany: (items: I[]) => Promise<R[]>,
): ((item: I, options?: { afterMs?: number }) => Promise<R>) & { idle(): Promise<void> } {
  let queue: Pending<I, R>[] = [];
  let writing = false;
  /** A drain waiting for a row's `afterMs`: a row that may not wait starts it at once. */
  let delayed: NodeJS.Timeout | undefined;
  /** The newest item's write. Items settle in the order they were queued, so it settles last. */
  let newest: Promise<unknown> = Promise.resolve();

  const writeAlone = async (entry: Pending<I, R>) => {
    try {
      entry.resolve((await writeMany([entry.item]))[0]!);
    } catch (error) {
      entry.reject(error);
    }
  };
  const drain = async () => {
    writing = true;
    delayed = undefined;
    while (queue.length > 0) {
      const batch = queue.slice(0, MAX_ROWS);
      queue = queue.slice(batch.length);
      try {
        const results = await writeMany(batch.map((entry) => entry.item));
        batch.forEach((entry, i) => entry.resolve(results[i]!));
      } catch (error) {
        if (batch.length === 1) batch[0]!.reject(error);
        else for (const entry of batch) await writeAlone(entry);
      }
    }
    // Cleared in the same step as the loop sees nothing left, so an item queued after that always starts a new loop.
    writing = false;
  };
  const write = (item: I, { afterMs = 0 } = {}) => {
    const written = new Promise<R>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      const hurried = delayed !== undefined && afterMs === 0;
      if (writing && !hurried) return;
      writing = true;
      clearTimeout(delayed);
      delayed = afterMs > 0 ? setTimeout(() => void drain(), afterMs) : undefined;
      if (!delayed) setImmediate(() => void drain());
    });
    newest = written;
    return written;
  };
  // Every item queued until now written (or failed); items queued later are not waited for, so a
  // steady stream of writes cannot hold a caller back for ever.
  const idle = () =>
    newest.then(
      () => undefined,
      () => undefined,
    );
  return Object.assign(write, { idle });
}

/**
 * A VALUES list of `rows` for one statement, every value a placeholder cast to its column's type
 * (so NULLs are typed too), numbered from `$${first}`.
 */
export function valuesList(rows: unknown[][], types: readonly string[], first = 1): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const tuples = rows.map((row) => `(${row.map((value, column) => `$${first + params.push(value) - 1}::${types[column]}`).join(", ")})`);
  return { sql: tuples.join(", "), params };
}
