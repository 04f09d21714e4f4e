import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { createKey, findAccount } from "../../src/accounts/key-store.js";
import { createUsageLedger } from "../../src/billing/ledger.js";
import { openLedgerJournal } from "../../src/billing/ledger-journal.js";
import type { Database } from "../../src/storage/database.js";
import { forEachDatabase } from "../helpers/databases.js";
import { usage } from "../helpers/usage.js";

const dir = mkdtempSync(join(tmpdir(), "ledger-journal-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const journalPath = () => join(dir, `journal-${++files}.jsonl`);

async function keyOf(db: Database, account: string): Promise<{ accountId: string; keyId: string }> {
  const key = await createKey(db, { account });
  return { accountId: (await findAccount(db, account))!.id, keyId: key.id };
}

const rowsOf = (db: Database, requestIds: string[]) =>
  db.query<{ request_id: string; status: string; cost_usd: string }>(
    "SELECT request_id, status, cost_usd::text AS cost_usd FROM usage_records WHERE request_id = ANY($1::text[])",
    [requestIds],
  );
const spentOf = async (db: Database, keyId: string) =>
  (await db.query<{ spent: string }>("SELECT spent_usd::text AS spent FROM api_keys WHERE id = $1", [keyId]))[0]!.spent;

forEachDatabase("the ledger's write-ahead journal", ({ db }) => {
  test("an unreserved row is in the journal when record returns, in the table once settled, and the journal is emptied", async () => {
    const { accountId, keyId } = await keyOf(db, "journal-written");
    const path = journalPath();
    const journal = openLedgerJournal(path);
    const ledger = createUsageLedger(db, journal);
    const rows = [1, 2, 3].map(() => usage(accountId, keyId, { costUsd: "0.0000125", unreserved: true, api: "embeddings" }));
    await Promise.all(rows.map((row) => ledger.record(row)));
    const lines = readFileSync(path, "utf8").trim().split("\n");
    assert.deepEqual(
      lines.map((line) => JSON.parse(line).requestId),
      rows.map((row) => row.requestId),
    );
    await ledger.settled();
    assert.equal(
      (
        await rowsOf(
          db,
          rows.map((r) => r.requestId),
        )
      ).length,
      3,
    );
    assert.equal(await spentOf(db, keyId), "0.0000375");
    assert.equal(readFileSync(path, "utf8"), "", "every row written: the journal is empty");
    // A row with a reservation (or an in-flight row) goes to the database before record returns, never to the journal.
    const reserved = usage(accountId, keyId, { costUsd: "0.000001" });
    await ledger.record(reserved);
    assert.equal((await rowsOf(db, [reserved.requestId])).length, 1);
    assert.equal(readFileSync(path, "utf8"), "");
    journal.close();
  });

  test("a stopped process's lines are written at the next start, each billed once; a torn line is dropped", async () => {
    const { accountId, keyId } = await keyOf(db, "journal-replayed");
    const path = journalPath();
    const left = [
      usage(accountId, keyId, { costUsd: "0.00002", unreserved: true }),
      usage(accountId, keyId, { costUsd: "0.00003", unreserved: true }),
    ];
    // The first was written to the table before the stop, the second was not; the last line was cut short.
    await createUsageLedger(db).record(left[0]!);
    writeFileSync(path, left.map((row) => `${JSON.stringify(row)}\n`).join(""));
    appendFileSync(path, JSON.stringify(usage(accountId, keyId, { unreserved: true })).slice(0, 40));
    const journal = openLedgerJournal(path);
    const ledger = createUsageLedger(db, journal);
    assert.equal(await ledger.replay(), 2);
    const rows = await rowsOf(
      db,
      left.map((r) => r.requestId),
    );
    assert.deepEqual(rows.map((r) => r.status).sort(), ["completed", "completed"]);
    assert.equal(await spentOf(db, keyId), "0.00005", "the row already in the table is not charged again");
    assert.equal(readFileSync(path, "utf8"), "", "replayed: the journal is empty");
    journal.close();
  });

  test("a full disk fails the append (/dev/full: ENOSPC on every write), and the row is in the table before record returns", async () => {
    const { accountId, keyId } = await keyOf(db, "journal-full-disk");
    const journal = openLedgerJournal("/dev/full");
    const ledger = createUsageLedger(db, journal);
    const row = usage(accountId, keyId, { costUsd: "0.000004", unreserved: true });
    await ledger.record(row);
    assert.equal((await rowsOf(db, [row.requestId])).length, 1);
    assert.equal(await spentOf(db, keyId), "0.000004");
    journal.close();
  });

  test("a batch line's row and a row the table would refuse never reach the journal", async () => {
    const { accountId, keyId } = await keyOf(db, "journal-batch-line");
    const path = journalPath();
    const journal = openLedgerJournal(path);
    const ledger = createUsageLedger(db, journal);
    // A batch line's attempt may be unbilled by its request id at once: its row is in the table when record returns.
    const line = usage(accountId, keyId, { unreserved: true, batchId: "batch_journal" });
    await ledger.record(line);
    assert.equal((await rowsOf(db, [line.requestId])).length, 1);
    await assert.rejects(ledger.record(usage(accountId, keyId, { unreserved: true, promptTokens: -1 })), RangeError);
    assert.equal(readFileSync(path, "utf8"), "");
    journal.close();
  });

  test("a full journal refuses more lines until the rows in it are written and it is emptied", async () => {
    const { accountId, keyId } = await keyOf(db, "journal-bounded");
    const path = journalPath();
    const journal = openLedgerJournal(path, 600); // two lines of about 400 bytes
    const ledger = createUsageLedger(db, journal);
    const rows = [1, 2, 3].map(() => usage(accountId, keyId, { unreserved: true }));
    await ledger.record(rows[0]!);
    await ledger.record(rows[1]!);
    assert.deepEqual(
      readFileSync(path, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line).requestId),
      rows.slice(0, 2).map((row) => row.requestId),
    );
    // Full: the third is in the table when record returns (its statement takes the two waiting rows with it).
    await ledger.record(rows[2]!);
    assert.equal(
      (
        await rowsOf(
          db,
          rows.map((r) => r.requestId),
        )
      ).length,
      3,
    );
    await ledger.settled();
    assert.equal(readFileSync(path, "utf8"), "");
    const again = usage(accountId, keyId, { unreserved: true });
    await ledger.record(again);
    assert.equal(JSON.parse(readFileSync(path, "utf8")).requestId, again.requestId, "emptied, it takes lines again");
    await ledger.settled();
    journal.close();
  });

  test("markUndelivered finds a journaled row that had not reached the table yet", async () => {
    const { accountId, keyId } = await keyOf(db, "journal-undelivered");
    const journal = openLedgerJournal(journalPath());
    const ledger = createUsageLedger(db, journal);
    const row = usage(accountId, keyId, { unreserved: true });
    await ledger.record(row);
    await ledger.markUndelivered(row.requestId, "response_not_stored");
    assert.equal((await rowsOf(db, [row.requestId]))[0]!.status, "failed");
    journal.close();
  });
});
