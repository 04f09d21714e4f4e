import { parse, protocol, type PGlite } from "@electric-sql/pglite";

/**
 * Named prepared statements for PGlite, kept per SQL text. PGlite's `query` sends every statement
 * unnamed, so PostgreSQL parses, analyses and plans it on each call, on the main thread: 0.5-1.2 ms
 * for the ledger's in-flight row, against 0.1 ms once it is prepared (PostgreSQL then keeps its
 * plan). This is what `pg`'s `name` and postgres.js's automatic preparation do on a connection.
 *
 * Only the embedded database uses it: one process owns the directory and every migration has run
 * before the first statement, so no prepared statement outlives a change of its tables.
 */

/** Statements kept at most (a VALUES list of n rows is its own text); the least recently used is closed. */
const MAX_STATEMENTS = 200;

interface Prepared {
  name: string;
  /** The parameters' type OIDs, as PostgreSQL inferred them: how each value is serialized. */
  paramTypes: number[];
}

export interface PreparedStatements {
  run(sql: string, params: unknown[]): Promise<Record<string, unknown>[]>;
}

export function preparedStatements(pglite: PGlite): PreparedStatements {
  const bySql = new Map<string, Prepared>();
  let counter = 0;

  const prepare = async (sql: string): Promise<Prepared> => {
    const name = `switchyard_${++counter}`;
    const { messages } = await pglite.execProtocol(
      Buffer.concat([
        protocol.serialize.parse({ name, text: sql, types: [] }),
        protocol.serialize.describe({ type: "S", name }),
        protocol.serialize.sync(),
      ]),
    );
    const prepared = { name, paramTypes: parse.parseDescribeStatementResults(messages) };
    if (bySql.size >= MAX_STATEMENTS) await closeOldest();
    bySql.set(sql, prepared);
    return prepared;
  };
  const closeOldest = async () => {
    const [sql, oldest] = bySql.entries().next().value as [string, Prepared];
    bySql.delete(sql);
    await pglite.execProtocol(Buffer.concat([protocol.serialize.close({ type: "S", name: oldest.name }), protocol.serialize.sync()]));
  };

  return {
    async run(sql, params) {
      let prepared = bySql.get(sql);
      if (prepared) {
        bySql.delete(sql); // most recently used goes last
        bySql.set(sql, prepared);
      } else {
        prepared = await prepare(sql);
      }
      const values = params.map((value, i) => serialize(pglite, value, prepared.paramTypes[i]));
      const { messages } = await pglite.execProtocol(
        Buffer.concat([
          protocol.serialize.bind({ statement: prepared.name, values }),
          protocol.serialize.describe({ type: "P" }),
          protocol.serialize.execute({}),
          protocol.serialize.sync(),
        ]),
      );
      return (parse.parseResults(messages, pglite.parsers)[0]?.rows ?? []) as Record<string, unknown>[];
    },
  };
}

/** As PGlite's own `query` serializes a parameter: by its type's serializer, else as text. */
function serialize(pglite: PGlite, value: unknown, type: number | undefined): string | null {
  if (value === null || value === undefined) return null;
  const serializer = type === undefined ? undefined : pglite.serializers[type];
  return serializer ? serializer(value) : String(value);
}
