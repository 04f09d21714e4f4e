/**
 * The refusals that are about capacity, not the request: each is one class here, whichever queue
 * refuses (a chat model's shards, an embedding model's inputs, an upstream model's replica pool:
 * all through tier-queue.ts), and the backend seam turns each into one backend error
 * (backends/engine-errors.ts).
 */

/** Too many requests (or embedding inputs) wait already. */
export class QueueFullError extends Error {}

/** A flex request found no spare capacity within its wait. */
export class WaitExpiredError extends Error {}
