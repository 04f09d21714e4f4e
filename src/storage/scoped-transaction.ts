import type { Database } from "./database.js";

type RunStatement = (sql: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

export interface TransactionHandle {
  readonly db: Database;
  /** Called when the transaction has committed or rolled back: any later use of the handle is a bug. */
  finish(): void;
}

/**
 * The Database given to a transaction callback, for either backend. Statements go straight to the
 * transaction's connection; a nested transaction() becomes a SAVEPOINT, so a helper that opens its
 * own transaction composes with a caller that already has one. Run nested transactions one after
 * another, not concurrently: they share one connection.
 */
export function transactionHandle(kind: Database["kind"], runStatement: RunStatement, depth = 1): TransactionHandle {
  let finished = false;
  const assertOpen = () => {
    if (finished) throw new Error("This transaction has already finished; use the handle only inside its callback.");
  };

  const db: Database = {
    kind,
    async query<Row>(sql: string, params?: unknown[]) {
      assertOpen();
      return (await runStatement(sql, params)) as Row[];
    },
    async transaction<T>(fn: (tx: Database) => Promise<T>): Promise<T> {
      assertOpen();
      const savepoint = `switchyard_sp_${depth}`;
      await runStatement(`SAVEPOINT ${savepoint}`);
      const nested = transactionHandle(kind, runStatement, depth + 1);
      try {
        const result = await fn(nested.db);
        await runStatement(`RELEASE SAVEPOINT ${savepoint}`);
        return result;
      } catch (error) {
        await runStatement(`ROLLBACK TO SAVEPOINT ${savepoint}`);
        await runStatement(`RELEASE SAVEPOINT ${savepoint}`);
        throw error;
      } finally {
        nested.finish();
      }
    },
    async close() {
      throw new Error("close() the database itself, not a transaction handle.");
    },
  };

  return {
    db,
    finish() {
      finished = true;
    },
  };
}
