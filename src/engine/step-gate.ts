/**
 * Makes room between decode steps for an operation that needs the context to itself.
 *
 * node-llama-cpp decodes under the context's lock and keeps it, step after step, for as long as a
 * decode is queued when a step ends. With streams running one always is: each queues its next token
 * while the others' tokens are still being sampled. Erasing a sequence's cells (a new request taking
 * a cached sequence, a preempted request giving its cells back) needs that same lock, so it waited
 * until every running stream had finished: a new request's first token 7-16 s late at 16 streams,
 * and a priority request waiting out its preempted victim's whole batch.
 *
 * While such an operation waits, `wait()` holds every stream back before its next step; the queue
 * drains, the lock is let go, the operation runs, and the streams go on: one step's pause.
 */
export class StepGate {
  private waitingOperations = 0;
  private opened: Promise<void> = Promise.resolve();
  private open: () => void = () => {};

  /** Resolved unless an operation is waiting for the context; then resolves once it has run. */
  wait(): Promise<void> {
    return this.opened;
  }

  /** Runs `operation` with the streams held back before their next step. */
  async exclusive<T>(operation: () => Promise<T>): Promise<T> {
    if (this.waitingOperations++ === 0) this.opened = new Promise((resolve) => (this.open = resolve));
    try {
      return await operation();
    } finally {
      if (--this.waitingOperations === 0) this.open();
    }
  }
}
