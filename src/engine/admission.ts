/**
 * First-come admission to a fixed number of sequence slots, with a bounded wait queue.
 * Each sequence owns a KV cache of the full context window, so a slot is all a request needs.
 * A waiter that is aborted leaves the queue at once; a freed slot goes to the oldest waiter.
 */
export class QueueFullError extends Error {}

export class Admission {
  private running = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(
    private readonly slots: number,
    private readonly maxWaiting: number,
  ) {}

  get stats(): { running: number; waiting: number; slots: number } {
    return { running: this.running, waiting: this.waiters.length, slots: this.slots };
  }

  /** Resolves once a slot is held; call the returned release exactly once. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.running < this.slots && this.waiters.length === 0) {
      this.running++;
      return this.releaser();
    }
    if (this.waiters.length >= this.maxWaiting) throw new QueueFullError("The model's request queue is full.");
    await new Promise<void>((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        this.waiters.splice(this.waiters.indexOf(grant), 1);
        reject(signal?.reason ?? new Error("aborted"));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(grant);
    });
    return this.releaser();
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) next(); // the slot passes straight to the oldest waiter
      else this.running--;
    };
  }
}
