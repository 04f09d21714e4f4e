/**
 * The refusals that are about capacity, not the request: each is one class here, whichever queue
 * refuses (a chat model's shards, an embedding model's inputs, an upstream model's replica pool:
 * all through tier-queue.ts), and the backend seam turns each into one backend error
 * (backends/engine-errors.ts). Also the one about the model itself: the adapter a request names
 * is not (or no longer) loaded.
 */

/** Too many requests (or embedding inputs) wait already. */
export class QueueFullError extends Error {}

/** A flex request found no spare capacity within its wait. */
export class WaitExpiredError extends Error {}

/** A request named an adapter the host has not loaded (or has removed). */
export class UnknownAdapterError extends Error {}
