import { discardAttempt, discardUnkeptAttempts } from "../billing/batch-attempts.js";
import type { Database } from "../storage/database.js";
import type { FileStore } from "../storage/files.js";
import { BatchMoved, finalTarget, writeResults } from "./finalize.js";
import { ActiveBatch, type QueuedLine } from "./active-batch.js";
import { answerLine, closeOpenLines, failBatch, setStatus, type BatchRow } from "./batch-store.js";

/** What running one line through the API answered. `requestId`: its ledger row, when one was written. */
export interface LineResult {
  statusCode: number;
  body: string;
  requestId: string | null;
  /** The error's `code`, when the answer is an error. */
  code: string | null;
}

export interface LineRequest {
  accountId: string;
  keyId: string;
  batchId: string;
  endpoint: string;
  body: string;
  /** Aborted when the line's answer could no longer be kept (its batch's output is over the storage quota): stop computing it. */
  signal?: AbortSignal;
}

/** Runs a line as the operation a client's request runs (line-executor.ts: checks, lifecycle, ledger), never through HTTP. */
export type LineExecutor = (line: LineRequest) => Promise<LineResult>;

export interface BatchRunnerDeps {
  db: Database;
  files: FileStore;
  execute: LineExecutor;
  /** How many lines of `model` may run at once now: its sequences that no other tier holds or waits for. */
  capacity(model: string): number;
  ownerId: string;
  /** Bytes an account may keep in files, batch outputs included (SWITCHYARD_FILE_BYTES_PER_ACCOUNT). */
  fileBytesPerAccount?: number;
  /** Whether the server process that owned a batch is gone (its batches are adopted). */
  ownerIsGone(tx: Database, ownerId: string): Promise<boolean>;
  log(message: string): void;
  pollMs?: number;
  /** How often the batches table is read again for new, cancelled or orphaned batches. */
  refreshMs?: number;
}

/** A server error is tried again this many times before it is the line's answer. */
const SERVER_ERROR_ATTEMPTS = 3;

/**
 * Runs the lines of every batch this process owns, on capacity no other tier waits for: a line
 * starts only while its model has a sequence that no priority, standard or flex request holds or
 * waits for, and the engine preempts batch lines first. Accounts take turns, then their batches,
 * one line each, so many batches share the spare capacity fairly. Each line's answer is written
 * once; an attempt whose answer is not kept is unbilled (billing/batch-attempts.ts).
 */
export class BatchRunner {
  private readonly batches = new Map<string, ActiveBatch>();
  private readonly runningByModel = new Map<string, number>();
  /** Lines started so far; an account's and a batch's last start are stamped with it. */
  private served = 0;
  private readonly accountServedAt = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private lastRefresh = 0;
  private stopped = false;
  private ticking = false;
  private tickAgain = false;
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly deps: BatchRunnerDeps) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.deps.pollMs ?? 250);
    this.timer.unref();
    this.wake();
  }

  /** Look at the batches table now (a batch was created or cancelled). */
  wake(): void {
    this.lastRefresh = 0;
    void this.tick();
  }

  /** Starts no more lines; resolves once the lines running have ended (a shutdown's drain ends them). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await Promise.allSettled([...this.running]);
  }

  /** One tick at a time (two would read the same lines ahead twice); a tick asked for meanwhile runs after. */
  private async tick(): Promise<void> {
    if (this.ticking) {
      this.tickAgain = true;
      return;
    }
    this.ticking = true;
    try {
      do {
        this.tickAgain = false;
        await this.tickOnce();
      } while (this.tickAgain && !this.stopped);
    } finally {
      this.ticking = false;
    }
  }

  private async tickOnce(): Promise<void> {
    if (this.stopped) return;
    try {
      if (Date.now() - this.lastRefresh >= (this.deps.refreshMs ?? 2000)) {
        await this.refresh();
      }
      for (const batch of this.batches.values()) await batch.refill(this.deps.db);
      this.dispatch();
      for (const batch of [...this.batches.values()]) await this.maybeEnd(batch);
    } catch (error) {
      this.deps.log(`batch runner: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** Reads the active batches: adopts orphaned ones, and learns of new and cancelled ones. */
  private async refresh(): Promise<void> {
    this.lastRefresh = Date.now();
    const { db, ownerId } = this.deps;
    const rows = await db.query<BatchRow>(
      "SELECT * FROM batches WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling') ORDER BY created_at",
    );
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.id);
      const known = this.batches.get(row.id);
      if (known) {
        known.status = row.status;
        continue;
      }
      // This process is validating it right now (create has not returned): it is not the runner's yet.
      if (row.owner_id === ownerId && row.status === "validating") continue;
      if (row.owner_id !== ownerId && !(await this.adopt(row))) continue;
      if (row.status === "validating") {
        // Adopted: the server that owned it stopped while it validated the file, so the batch cannot tell how far it got.
        await failBatch(
          db,
          row.id,
          [
            {
              code: "validation_interrupted",
              message: "The server stopped while validating this batch; create it again.",
              param: null,
              line: null,
            },
          ],
          null,
        );
        continue;
      }
      this.batches.set(row.id, new ActiveBatch(row));
    }
    for (const id of this.batches.keys()) if (!seen.has(id) && this.batches.get(id)!.inFlight.size === 0) this.batches.delete(id);
  }

  /** Takes over a batch whose process died; attempts it billed but never answered are unbilled first. */
  private async adopt(row: BatchRow): Promise<boolean> {
    const { db, ownerId } = this.deps;
    const taken = await db.transaction(async (tx) => {
      if (row.owner_id !== null && !(await this.deps.ownerIsGone(tx, row.owner_id))) return false;
      const updated = await tx.query("UPDATE batches SET owner_id = $2 WHERE id = $1 AND owner_id IS NOT DISTINCT FROM $3 RETURNING id", [
        row.id,
        ownerId,
        row.owner_id,
      ]);
      return updated.length > 0;
    });
    if (!taken) return false;
    const discarded = await discardUnkeptAttempts(db, row.id);
    this.deps.log(`resumed batch ${row.id}${discarded > 0 ? `; ${discarded} attempt(s) cut short by the stop are not billed` : ""}`);
    return true;
  }

  /**
   * Starts lines while their models have spare capacity, one at a time: the account served least
   * recently goes first, and within it the batch served least recently.
   */
  private dispatch(): void {
    const hasCapacity = (model: string) => (this.runningByModel.get(model) ?? 0) < this.deps.capacity(model);
    const servedAt = (account: string) => this.accountServedAt.get(account) ?? -1;
    while (!this.stopped) {
      const runnable = [...this.batches.values()]
        .filter((b) => b.runnable())
        .sort((x, y) => servedAt(x.row.account_id) - servedAt(y.row.account_id) || x.servedAt - y.servedAt);
      if (!runnable.some((batch) => this.startNext(batch, hasCapacity))) return;
    }
  }

  /** Starts the batch's next line that may run now; false when none may. */
  private startNext(batch: ActiveBatch, hasCapacity: (model: string) => boolean): boolean {
    const line = batch.next(hasCapacity);
    if (!line) return false;
    this.served++;
    this.accountServedAt.set(batch.row.account_id, this.served);
    batch.servedAt = this.served;
    this.launch(batch, line);
    return true;
  }

  private launch(batch: ActiveBatch, line: QueuedLine): void {
    this.runningByModel.set(line.model, (this.runningByModel.get(line.model) ?? 0) + 1);
    batch.inFlight.add(line.line);
    const run = this.runLine(batch, line).finally(() => {
      this.runningByModel.set(line.model, (this.runningByModel.get(line.model) ?? 1) - 1);
      batch.inFlight.delete(line.line);
      this.running.delete(run);
      if (!this.stopped) void this.tick();
    });
    this.running.add(run);
  }

  private async runLine(batch: ActiveBatch, line: QueuedLine): Promise<void> {
    const { db, log } = this.deps;
    let result: LineResult;
    try {
      result = await this.deps.execute({
        accountId: batch.row.account_id,
        keyId: batch.row.key_id,
        batchId: batch.row.id,
        endpoint: batch.row.endpoint,
        body: line.body,
        signal: batch.signal,
      });
    } catch (error) {
      log(`batch ${batch.row.id} line ${line.line}: ${error instanceof Error ? error.message : String(error)}`);
      if (!batch.closed) batch.retry(line, ++line.attempts);
      return;
    }
    // Closed meanwhile by the storage quota (and stopped, if it was still computing): its answer is
    // that error already; this attempt is not billed, nor run again.
    if (batch.closed) return await this.unbill(result);
    const serverError = result.statusCode >= 500 && result.statusCode !== 503;
    // Busy, rate-limited or stopping: not an answer, the line runs again (after a restart, if stopping).
    // A request larger than the key's whole TPM limit can never pass (429 request_too_large): that is its answer.
    const retry =
      (result.statusCode === 429 && result.code !== "request_too_large") ||
      result.statusCode === 503 ||
      (serverError && (this.stopped || ++line.attempts < SERVER_ERROR_ATTEMPTS));
    try {
      const refusal = retry
        ? "retry"
        : await answerLine(
            db,
            { id: batch.row.id, accountId: batch.row.account_id },
            line,
            { requestId: result.requestId, statusCode: result.statusCode, body: result.body, error: null },
            this.deps.fileBytesPerAccount,
          );
      if (refusal === null) return;
      if (typeof refusal === "object") return await this.overQuota(batch, line, result, refusal);
      // Answered already (closed by the quota, expiry or cancellation meanwhile): this attempt is not billed, and that stands.
      if (refusal === "answered") return await this.unbill(result);
    } catch (error) {
      log(
        `batch ${batch.row.id} line ${line.line}: the answer could not be stored (${error instanceof Error ? error.message : String(error)}); it runs again`,
      );
    }
    // Not kept: this attempt is not billed, and the line runs again.
    await this.unbill(result);
    if (!this.stopped) batch.retry(line, line.attempts);
  }

  private async unbill(result: LineResult): Promise<void> {
    if (result.requestId)
      await discardAttempt(this.deps.db, result.requestId).catch((error: unknown) =>
        this.deps.log(`could not unbill ${result.requestId}: ${String(error)}`),
      );
  }

  /**
   * The answer would pass the account's storage quota: it is not kept nor billed, and this line and
   * every line not yet answered end with that error (unbilled), those still running stopped at once
   * (an embedding line of thousands of inputs would compute for minutes only to be thrown away); the
   * batch then completes with what it kept.
   */
  private async overQuota(
    batch: ActiveBatch,
    line: QueuedLine,
    result: LineResult,
    { quota, used }: { quota: number; used: number },
  ): Promise<void> {
    await this.unbill(result);
    const message = `Not run or not kept: the batch's output would pass this account's storage quota of ${quota} bytes (${used} in use, files and running batches' outputs); delete files or raise SWITCHYARD_FILE_BYTES_PER_ACCOUNT.`;
    await closeOpenLines(this.deps.db, batch.row.id, { code: "file_storage_limit_exceeded", message });
    batch.closeUnrun();
    this.deps.log(
      `batch ${batch.row.id}: output over the account's storage quota at line ${line.line}; the lines left are closed unbilled`,
    );
  }

  /** A batch with nothing left to run (or past its window, or cancelled) writes its files and ends. */
  private async maybeEnd(batch: ActiveBatch): Promise<void> {
    if (batch.inFlight.size > 0 || this.stopped) return;
    const { db, files } = this.deps;
    const target = { id: batch.row.id, accountId: batch.row.account_id };
    try {
      if (batch.status === "cancelling") {
        await closeOpenLines(db, batch.row.id, { code: "batch_cancelled", message: "The batch was cancelled before this line ran." });
        await writeResults(db, files, target, "cancelling", "cancelled");
      } else if (batch.status === "finalizing") {
        await writeResults(db, files, target, "finalizing", finalTarget(batch.row));
      } else if (batch.status === "in_progress" && batch.expired()) {
        await closeOpenLines(db, batch.row.id, {
          code: "batch_expired",
          message: "This line was not run within the batch's completion window.",
        });
        if (await setStatus(db, batch.row.id, ["in_progress"], "finalizing"))
          await writeResults(db, files, target, "finalizing", "expired");
      } else if (batch.status === "in_progress" && (await batch.finished(db))) {
        if (await setStatus(db, batch.row.id, ["in_progress"], "finalizing"))
          await writeResults(db, files, target, "finalizing", "completed");
      } else {
        return;
      }
    } catch (error) {
      if (!(error instanceof BatchMoved)) throw error;
    }
    this.batches.delete(batch.row.id);
  }
}
