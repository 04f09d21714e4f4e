/**
 * Runs async jobs one at a time, in the order they were queued. PGlite is a single connection, so
 * every statement and every whole transaction goes through one of these: a caller's transaction can
 * then never have another caller's statements run in the middle of it.
 */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(job: () => Promise<T>): Promise<T> {
    const result = this.tail.then(job);
    // The next job waits for this one to settle, whether it succeeded or not.
    this.tail = result.catch(() => undefined);
    return result;
  }
}
