/** A one-consumer queue the step loop pushes a request's events into and its generator drains. */
export class EventQueue<T> {
  private readonly items: T[] = [];
  private failure: { error: unknown } | undefined;
  private closed = false;
  private wake: (() => void) | undefined;

  push(item: T): void {
    this.items.push(item);
    this.notify();
  }

  /** No more items after those queued. */
  close(): void {
    this.closed = true;
    this.notify();
  }

  /** The consumer gets `error` after the items already queued. */
  fail(error: unknown): void {
    this.failure ??= { error };
    this.notify();
  }

  async *drain(): AsyncGenerator<T> {
    for (;;) {
      while (this.items.length > 0) yield this.items.shift()!;
      if (this.failure) throw this.failure.error;
      if (this.closed) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
