import { stringifyJson } from "../../protocol/money-json.js";
import type { Chunk } from "../operation.js";
import type { BackgroundStore, StoredEvent } from "./background-store.js";

/** How long a running response's new events wait before they are written, so one write carries many. */
const EVENT_FLUSH_MS = 100;

/**
 * A background response running in this process: its events as sent (in memory, for its
 * followers, and written behind to response_events for replay and for other processes), and the
 * controller that cancels it.
 */
export class LiveResponse {
  readonly controller = new AbortController();
  /** Why it was stopped by a caller: its runner then ends it `cancelled` (or, deleted, writes nothing). */
  stoppedBy: "cancel" | "delete" | null = null;
  private readonly events: Array<Chunk & { seq: number }> = [];
  private unwritten: StoredEvent[] = [];
  private writing: Promise<void> | null = null;
  private finished = false;
  private wake = new Set<() => void>();
  /** Settles once the runner has stored how it ended. */
  readonly ended: Promise<void>;
  private markEnded!: () => void;

  constructor(
    readonly id: string,
    readonly accountId: string,
    private readonly store: BackgroundStore,
  ) {
    this.ended = new Promise((resolve) => (this.markEnded = resolve));
  }

  /** An event to send; written behind unless `stored` says the caller stores it itself (the last one, with the end). */
  push(type: string, payload: Record<string, unknown>, stored = false): void {
    const seq = payload.sequence_number as number;
    this.events.push({ event: type, data: payload, seq });
    if (!stored) {
      this.unwritten.push({ seq, data: stringifyJson(payload) });
      this.writing ??= this.writeSoon();
    }
    this.notify();
  }

  /** Writes every event not yet written (the runner waits for it before it stores the end). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    await this.write();
  }

  finish(): void {
    this.finished = true;
    this.notify();
    this.markEnded();
  }

  /** The events after `after`, then each as it comes, until it ends or `signal` aborts. */
  async *follow(after: number, signal: AbortSignal): AsyncGenerator<Chunk> {
    let next = this.events.findIndex((e) => e.seq > after);
    if (next < 0) next = this.events.length;
    while (!signal.aborted) {
      while (next < this.events.length) {
        const { event, data } = this.events[next++]!;
        yield { event, data };
      }
      if (this.finished) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          this.wake.delete(done);
          signal.removeEventListener("abort", done);
          resolve();
        };
        this.wake.add(done);
        signal.addEventListener("abort", done, { once: true });
      });
    }
  }

  private notify(): void {
    for (const wake of [...this.wake]) wake();
  }

  private async writeSoon(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, EVENT_FLUSH_MS));
    try {
      await this.write();
    } finally {
      this.writing = null;
    }
  }

  /** A response cancelled or deleted elsewhere (another process, or its row pruned) stops here too. */
  private async write(): Promise<void> {
    const batch = this.unwritten.splice(0);
    if (batch.length === 0) return;
    // A failed write loses these events for replay from storage only (followers here have them): the run goes on.
    const kept = await this.store.appendEvents(this.id, batch).catch(() => true);
    if (!kept && !this.controller.signal.aborted) {
      this.stoppedBy = "delete";
      this.controller.abort(new Error("the background response was cancelled or deleted elsewhere"));
    }
  }
}
