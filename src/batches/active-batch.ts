import type { Database } from "../storage/database.js";
import type { BatchStatus } from "../protocol/batches-response.js";
import { pendingLines, type BatchRow } from "./batch-store.js";

/** A line waiting to run in this process. */
export interface QueuedLine {
  line: number;
  customId: string;
  body: string;
  model: string;
  /** Server errors so far (a line's answer after SERVER_ERROR_ATTEMPTS). */
  attempts: number;
  /** Times it was put back (busy, rate-limited): its backoff grows with them. */
  tries: number;
  /** Not before this time (ms since the epoch). */
  notBefore: number;
}

/** Lines read ahead per batch: enough to keep the capacity busy, little enough to hold in memory. */
const READ_AHEAD = 64;
const MAX_BACKOFF_MS = 30_000;

/** A batch this process runs: its status as last read, and the lines it has read ahead. */
export class ActiveBatch {
  status: BatchStatus;
  /** When it last started a line (the runner's count): the batch served least recently goes first within its account. */
  servedAt = -1;
  readonly inFlight = new Set<number>();
  private queue: QueuedLine[] = [];
  private cursor = 0;
  private exhausted = false;
  /** Aborted once the batch's output can no longer be stored: its lines still running stop computing. */
  private readonly closing = new AbortController();

  constructor(readonly row: BatchRow) {
    this.status = row.status;
  }

  expired(): boolean {
    return new Date(this.row.expires_at).getTime() <= Date.now();
  }

  runnable(): boolean {
    return this.status === "in_progress" && !this.expired() && this.queue.length > 0;
  }

  /** Reads the next unanswered lines once the read-ahead runs low. */
  async refill(db: Database): Promise<void> {
    if (this.status !== "in_progress" || this.exhausted || this.queue.length >= READ_AHEAD / 4) return;
    const rows = await pendingLines(db, this.row.id, this.cursor, READ_AHEAD);
    for (const row of rows) {
      if (!this.inFlight.has(row.line))
        this.queue.push({
          line: row.line,
          customId: row.custom_id,
          body: row.body,
          model: modelOf(row.body),
          attempts: 0,
          tries: 0,
          notBefore: 0,
        });
    }
    if (rows.length > 0) this.cursor = rows.at(-1)!.line;
    if (rows.length < READ_AHEAD) this.exhausted = true;
  }

  /** The first line that may start now: due, and its model has capacity for it. */
  next(hasCapacity: (model: string) => boolean): QueuedLine | undefined {
    const now = Date.now();
    const index = this.queue.findIndex((line) => line.notBefore <= now && hasCapacity(line.model));
    return index === -1 ? undefined : this.queue.splice(index, 1)[0];
  }

  /** Puts a line back, to run again after a backoff. */
  retry(line: QueuedLine, attempts: number): void {
    line.attempts = attempts;
    line.tries++;
    line.notBefore = Date.now() + Math.min(MAX_BACKOFF_MS, 250 * 2 ** line.tries);
    this.queue.unshift(line);
  }

  /** What each of its lines runs under: aborted by `closeUnrun`. */
  get signal(): AbortSignal {
    return this.closing.signal;
  }

  /** Whether its open lines were closed (the storage quota): nothing more of it runs or is kept. */
  get closed(): boolean {
    return this.closing.signal.aborted;
  }

  /** Its open lines were closed (the storage quota): forgets those read ahead and stops those running. */
  closeUnrun(): void {
    this.queue = [];
    this.exhausted = true;
    this.closing.abort();
  }

  /** Every line is answered (checked in the database, not only in memory). */
  async finished(db: Database): Promise<boolean> {
    if (this.queue.length > 0 || !this.exhausted || this.inFlight.size > 0) return false;
    const rows = await db.query<{ n: string | number }>("SELECT count(*) AS n FROM batch_lines WHERE batch_id = $1 AND NOT done", [
      this.row.id,
    ]);
    if (Number(rows[0]?.n ?? 0) === 0) return true;
    // Lines read earlier and put back by another path: read the file again from its start.
    this.cursor = 0;
    this.exhausted = false;
    return false;
  }
}

function modelOf(body: string): string {
  const model = (JSON.parse(body) as { model?: unknown }).model;
  return typeof model === "string" ? model : "";
}
