/**
 * The engine's refusals that are about capacity, not the request: each is one class here, whichever
 * part of the engine refuses (a chat model's request queue, an embedding model's input queue), and
 * the backend seam turns each into one backend error (backends/engine-errors.ts). Also the one about
 * the model itself: the adapter a request names is not (or no longer) loaded.
 */

/** Too many requests (or embedding inputs) wait already. */
export class QueueFullError extends Error {}

/** A flex request found no spare capacity within its wait. */
export class WaitExpiredError extends Error {}

/** A request named an adapter the host has not loaded (or has removed). */
export class UnknownAdapterError extends Error {}
