/**
 * A write-ahead journal for the rows that are a request's only bill (`unreserved`: an embedding's,
 * for a key without a budget). Such a row used to be written to the database before the answer
 * went out, a statement of about 1 ms on PGlite (on a 2-core Zen 4; 0.25 ms more for the hops to
 * its thread) that one short embedding's answer waited for. Appended here instead, a line in a
 * file of the data dir (one write(2): it outlives a kill -9 as the database's own files do, which
 * PGlite does not fsync either), the answer goes at once, and the rows go to the database a moment
 * later in groups. At the next start the lines still here are written first (`replay`), before
 * anything is served: each row's write is idempotent per request, so a line written twice bills once.
 */
import { closeSync, fstatSync, ftruncateSync, openSync, readFileSync, writeSync } from "node:fs";
import type { UsageRecord } from "./ports.js";

export interface LedgerJournal {
  /** Appends the record; false when it could not be (a full disk, or a full journal): the caller then waits for the database. */
  append(record: UsageRecord): boolean;
  /** One appended record is in the database; once every one is, the journal is emptied. */
  written(): void;
  /** What a stopped process left: the records of its lines that parse (a line torn by a power cut does not). */
  leftOver(): UsageRecord[];
  close(): void;
}

/**
 * The journal's size at most: past it an append is refused (the row is written before its answer,
 * as without a journal) until the rows already in it are written and it is emptied. Under a steady
 * stream of answers the journal is never empty by itself; this bounds it (1 MiB: about 2,500 rows).
 */
export const MAX_JOURNAL_BYTES = 1024 * 1024;

export function openLedgerJournal(path: string, maxBytes = MAX_JOURNAL_BYTES): LedgerJournal {
  const fd = openSync(path, "a+", 0o600);
  /** Bytes in the file: where a failed append is cut back to. */
  let size = fstatSync(fd).size;
  /** Lines appended and not yet written to the database; the left-over lines count until replayed. */
  let unwritten = 0;
  const empty = () => {
    ftruncateSync(fd, 0);
    size = 0;
  };
  return {
    append(record) {
      if (size >= maxBytes) return false;
      const line = Buffer.from(`${JSON.stringify(record)}\n`);
      try {
        writeSync(fd, line);
      } catch {
        // A partial line would run into the next one: cut it off, and let the database have this row.
        try {
          ftruncateSync(fd, size);
        } catch {
          // Nothing more to do: the caller waits for the database, which bills it.
        }
        return false;
      }
      size += line.length;
      unwritten++;
      return true;
    },
    written() {
      if (--unwritten === 0) empty();
    },
    leftOver() {
      const records = readFileSync(path, "utf8")
        .split("\n")
        .flatMap((line) => parsed(line) ?? []);
      unwritten += records.length;
      if (records.length === 0 && size > 0) empty(); // only torn lines
      return records;
    },
    close: () => closeSync(fd),
  };
}

function parsed(line: string): UsageRecord | undefined {
  if (line.trim() === "") return undefined;
  try {
    const record = JSON.parse(line) as UsageRecord;
    return typeof record === "object" && record !== null && typeof record.requestId === "string" ? record : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How long a journaled row waits before it is written: the rows of requests answered meanwhile
 * share its statement, the database's fixed cost paid once for them all.
 */
export const JOURNALED_WRITE_AFTER_MS = 20;
/** A journaled row whose write failed (the database away) is tried again this much later. */
const JOURNALED_RETRY_MS = 1000;

/**
 * Which rows the journal takes: those that are their request's only bill (no in-flight row, no
 * reservation), and not a batch line's, whose attempt may be unbilled by request id at once
 * (billing/batch-attempts.ts) and which nobody waits on.
 */
const journaled = (record: UsageRecord) => record.unreserved === true && record.batchId == null;

/**
 * The ledger's `record` over its group-committed `write`: a row the journal takes is appended and
 * written a moment later (again after a failure, until it is in: its line stays meanwhile, for the
 * next start); any other, or any the journal refuses, is written before `record` returns. `check`
 * throws for a row the table would refuse, before its line is appended. `replay` writes what a
 * stopped process left, before anything is served, and says how many rows.
 */
export function journaledWrites(
  write: (record: UsageRecord, options?: { afterMs?: number }) => Promise<unknown>,
  journal: LedgerJournal | undefined,
  check: (record: UsageRecord) => unknown,
): { record(record: UsageRecord): Promise<void>; replay(): Promise<number> } {
  const writeLater = (record: UsageRecord): Promise<unknown> =>
    write(record, { afterMs: JOURNALED_WRITE_AFTER_MS }).then(
      () => journal!.written(),
      () => setTimeout(() => void writeLater(record), JOURNALED_RETRY_MS).unref(),
    );
  return {
    async record(record) {
      if (!journal || !journaled(record)) return void (await write(record));
      check(record);
      if (!journal.append(record)) return void (await write(record));
      void writeLater(record);
    },
    async replay() {
      if (!journal) return 0;
      const left = journal.leftOver();
      await Promise.all(left.map((record) => write(record).then(() => journal.written())));
      return left.length;
    },
  };
}
