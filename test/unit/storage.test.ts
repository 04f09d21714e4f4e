import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { migrate, migrations, type Migration } from "../../src/storage/migrations.js";
import { openDatabase } from "../../src/storage/open.js";
import { openPglite } from "../../src/storage/pglite.js";
import { openPostgres } from "../../src/storage/postgres.js";
import { createTestDatabase, forEachDatabase, POSTGRES_TESTED } from "../helpers/databases.js";

const latestId = migrations.at(-1)!.id;

forEachDatabase(
  "migrations",
  ({ db }) => {
    test("apply every migration once, then nothing on later runs", async () => {
      assert.deepEqual(
        await migrate(db),
        migrations.map((migration) => migration.id),
      );
      assert.deepEqual(await migrate(db), []);
      const recorded = await db.query<{ id: number }>("SELECT id FROM schema_migrations ORDER BY id");
      assert.deepEqual(
        recorded.map((row) => row.id),
        migrations.map((migration) => migration.id),
      );
      const tables = await db.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_name IN ('accounts', 'api_keys') ORDER BY table_name",
      );
      assert.deepEqual(
        tables.map((row) => row.table_name),
        ["accounts", "api_keys"],
      );
    });

    test("an appended migration is the only one applied", async () => {
      const appended: Migration = {
        id: latestId + 1,
        name: "test table",
        sql: "CREATE TABLE appended_one (x int); CREATE INDEX ON appended_one (x);",
      };
      assert.deepEqual(await migrate(db, [...migrations, appended]), [appended.id]);
      assert.deepEqual(await migrate(db, [...migrations, appended]), []);
    });

    test("a failing migration leaves no trace and is not recorded", async () => {
      const broken: Migration = { id: latestId + 2, name: "broken", sql: "CREATE TABLE half_done (x int); SELECT 1/0;" };
      await assert.rejects(migrate(db, [...migrations, broken]), /division by zero/);
      assert.deepEqual(await db.query("SELECT 1 FROM information_schema.tables WHERE table_name = 'half_done'"), []);
      assert.deepEqual(await db.query("SELECT 1 FROM schema_migrations WHERE id = $1", [broken.id]), []);
    });

    test("migration ids out of order are refused before anything runs", async () => {
      const first = migrations[0]!;
      await assert.rejects(migrate(db, [...migrations, { ...first, name: "again" }]), /strictly increasing/);
    });
  },
  { migrate: false },
);

forEachDatabase("database", ({ db }) => {
  test("a transaction that throws is rolled back", async () => {
    await db.query("CREATE TABLE rollback_probe (x int)");
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.query("INSERT INTO rollback_probe VALUES (1)");
        throw new Error("boom");
      }),
      /boom/,
    );
    assert.deepEqual(await db.query("SELECT * FROM rollback_probe"), []);
  });

  test("a transaction that returns is committed and passes its result through", async () => {
    await db.query("CREATE TABLE commit_probe (x int)");
    const result = await db.transaction(async (tx) => {
      await tx.query("INSERT INTO commit_probe VALUES (1)");
      return "done";
    });
    assert.equal(result, "done");
    assert.deepEqual(await db.query("SELECT x FROM commit_probe"), [{ x: 1 }]);
  });

  test("a failed statement rolls back the whole transaction", async () => {
    await db.query("CREATE TABLE failed_statement_probe (x int PRIMARY KEY)");
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.query("INSERT INTO failed_statement_probe VALUES (1)");
        await tx.query("INSERT INTO failed_statement_probe VALUES (1)");
      }),
    );
    assert.deepEqual(await db.query("SELECT * FROM failed_statement_probe"), []);
  });

  test("a nested transaction is a savepoint: its failure keeps the outer work", async () => {
    await db.query("CREATE TABLE savepoint_probe (x int)");
    await db.transaction(async (tx) => {
      await tx.query("INSERT INTO savepoint_probe VALUES (1)");
      await assert.rejects(
        tx.transaction(async (inner) => {
          await inner.query("INSERT INTO savepoint_probe VALUES (2)");
          throw new Error("inner");
        }),
        /inner/,
      );
      await tx.transaction(async (inner) => {
        await inner.query("INSERT INTO savepoint_probe VALUES (3)");
      });
    });
    assert.deepEqual(await db.query("SELECT x FROM savepoint_probe ORDER BY x"), [{ x: 1 }, { x: 3 }]);
  });

  test("a transaction handle cannot be used after the transaction ends", async () => {
    const leaked = await db.transaction(async (tx) => tx);
    await assert.rejects(leaked.query("SELECT 1"), /already finished/);
  });

  test("a long statement does not hold the event loop (PGlite runs on a thread of its own)", async () => {
    let turns = 0;
    const timer = setInterval(() => turns++, 1);
    try {
      // Hundreds of milliseconds of work inside the database, on any machine.
      const [row] = await db.query<{ n: string }>("SELECT count(*)::text AS n FROM generate_series(1, 3000000) AS g WHERE g % 7 = 0");
      assert.equal(row!.n, "428571");
    } finally {
      clearInterval(timer);
    }
    assert.ok(turns > 0, "timers ran while the statement did");
  });

  test("uncommitted rows are invisible to other callers", async () => {
    await db.query("CREATE TABLE isolation_probe (x int)");
    let release!: () => void;
    const inserted = new Promise<void>((resolve) => (release = resolve));
    const transaction = db.transaction(async (tx) => {
      await tx.query("INSERT INTO isolation_probe VALUES (1)");
      release();
      await new Promise((resolve) => setTimeout(resolve, 50));
      throw new Error("roll back");
    });
    // Watched from the start: the rollback may settle before the query queued behind it answers.
    const rolledBack = assert.rejects(transaction, /roll back/);
    await inserted;
    const seen = await db.query("SELECT * FROM isolation_probe");
    await rolledBack;
    assert.deepEqual(seen, []);
  });

  test("BIGINT and NUMERIC come back as strings, timestamps as Dates, arrays as arrays", async () => {
    const [row] = await db.query<Record<string, unknown>>(
      "SELECT 9007199254740993::bigint AS big, 12.345000::numeric AS money, count(*) AS n, now() AS at, $1::text[] AS list",
      [["a", "b"]],
    );
    assert.equal(row?.big, "9007199254740993");
    assert.equal(row?.money, "12.345000");
    assert.equal(row?.n, "1");
    assert.ok(row?.at instanceof Date);
    assert.deepEqual(row?.list, ["a", "b"]);
  });

  test("a query without params may hold several statements and returns the last one's rows", async () => {
    assert.deepEqual(await db.query("SELECT 1 AS a; SELECT 2 AS b"), [{ b: 2 }]);
  });
});

describe("PGlite specifics", () => {
  test("data persists across close and reopen", async () => {
    const dir = await mkdtemp(join(tmpdir(), "switchyard-pglite-"));
    try {
      const first = await openPglite(dir);
      await migrate(first);
      await first.query("INSERT INTO accounts (id, name) VALUES ('acct_1', 'persisted')");
      await first.close();
      const second = await openPglite(dir);
      assert.deepEqual(await migrate(second), []);
      assert.deepEqual(await second.query("SELECT name FROM accounts"), [{ name: "persisted" }]);
      await second.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("statements with params are prepared once per text: errors, NULLs, arrays, transactions and eviction behave as unprepared ones", async () => {
    const { db, dispose } = await createTestDatabase("pglite");
    try {
      await db.query("CREATE TABLE prepared_probe (id int PRIMARY KEY, note text, tags text[])");
      const insert = "INSERT INTO prepared_probe (id, note, tags) VALUES ($1, $2, $3) RETURNING id, note, tags";
      assert.deepEqual(await db.query(insert, [1, null, ["a", "b"]]), [{ id: 1, note: null, tags: ["a", "b"] }]);
      // The same text again (now prepared): a constraint error is the statement's own, and it stays usable.
      await assert.rejects(db.query(insert, [1, "again", []]), /duplicate key/);
      assert.deepEqual(await db.query(insert, [2, "x", []]), [{ id: 2, note: "x", tags: [] }]);
      // A text that cannot be parsed is refused each time, never kept.
      await assert.rejects(db.query("SELEC $1", [1]), /syntax error/);
      await assert.rejects(db.query("SELEC $1", [1]), /syntax error/);
      // Inside a transaction that rolls back, the prepared statement's rows go with it.
      await assert.rejects(
        db.transaction(async (tx) => {
          await tx.query(insert, [3, "rolled back", null]);
          throw new Error("roll back");
        }),
        /roll back/,
      );
      assert.deepEqual(await db.query("SELECT id FROM prepared_probe WHERE id = $1", [3]), []);
      // More texts than the cache keeps: the oldest are closed, and each still runs.
      for (let i = 0; i < 260; i++) assert.deepEqual(await db.query(`SELECT $1::int + ${i} AS n`, [1]), [{ n: 1 + i }]);
      assert.deepEqual(await db.query(insert, [4, "after eviction", ["c"]]), [{ id: 4, note: "after eviction", tags: ["c"] }]);
      const [row] = await db.query<{ kept: string }>("SELECT count(*) AS kept FROM pg_prepared_statements WHERE name LIKE $1", [
        "switchyard\\_%",
      ]);
      assert.ok(Number(row?.kept) <= 200, `${row?.kept} statements kept`);
    } finally {
      await dispose();
    }
  });

  test("using the outer handle inside a transaction fails fast instead of hanging", async () => {
    const { db, dispose } = await createTestDatabase("pglite");
    try {
      await assert.rejects(
        db.transaction(async () => db.query("SELECT 1")),
        /transaction's own Database handle/,
      );
      assert.deepEqual(await db.query("SELECT 1 AS ok"), [{ ok: 1 }]);
    } finally {
      await dispose();
    }
  });
});

describe(
  "PostgreSQL specifics",
  { skip: !POSTGRES_TESTED && "PostgreSQL is not tested in this tier (SWITCHYARD_TEST_DATABASES=pglite)" },
  () => {
    test("two processes migrating at once apply each migration exactly once", async () => {
      const database = await createTestDatabase("postgres", { migrate: false });
      const others = await Promise.all([openPostgres(database.url!), openPostgres(database.url!), openPostgres(database.url!)]);
      try {
        const results = await Promise.all([database.db, ...others].map((db) => migrate(db)));
        assert.deepEqual(
          results.flat().sort((a, b) => a - b),
          migrations.map((migration) => migration.id),
        );
        const recorded = await database.db.query<{ count: string }>("SELECT count(*) AS count FROM schema_migrations");
        assert.equal(recorded[0]?.count, String(migrations.length));
      } finally {
        await Promise.all(others.map((db) => db.close()));
        await database.dispose();
      }
    });

    test("a wrong URL fails at open, not at the first query", async () => {
      await assert.rejects(openPostgres("postgres://postgres@127.0.0.1:5432/switchyard_no_such_database"), /does not exist/);
    });
  },
);

describe("openDatabase", () => {
  test("without a URL it opens PGlite under <dataDir>/db, migrated", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "switchyard-data-"));
    const saved = process.env.SWITCHYARD_DATABASE_URL;
    delete process.env.SWITCHYARD_DATABASE_URL;
    try {
      const db = await openDatabase({ dataDir });
      assert.equal(db.kind, "pglite");
      assert.ok(existsSync(join(dataDir, "db")));
      assert.deepEqual(await db.query("SELECT count(*) AS n FROM accounts"), [{ n: "0" }]);
      await db.close();
    } finally {
      if (saved !== undefined) process.env.SWITCHYARD_DATABASE_URL = saved;
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  test("with a URL it opens PostgreSQL, migrated", { skip: !POSTGRES_TESTED && "PostgreSQL is not tested in this tier" }, async () => {
    const database = await createTestDatabase("postgres", { migrate: false });
    const dataDir = await mkdtemp(join(tmpdir(), "switchyard-data-"));
    try {
      const db = await openDatabase({ dataDir, url: database.url });
      assert.equal(db.kind, "postgres");
      assert.ok(!existsSync(join(dataDir, "db")));
      assert.deepEqual(await db.query("SELECT count(*) AS n FROM accounts"), [{ n: "0" }]);
      await db.close();
    } finally {
      await database.dispose();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
