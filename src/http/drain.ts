import { setMaxListeners } from "node:events";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ServerShuttingDown } from "../errors.js";

/**
 * Graceful shutdown. On SIGTERM the server keeps listening but refuses new requests (503, so a
 * load balancer retries elsewhere; /health says "draining"), lets running requests finish for up
 * to the drain timeout, then aborts the rest with ServerShuttingDown: each stream ends with an
 * `error` event in the OpenAI shape, a waiting non-streamed request gets the 503 body, and each
 * ledger row says `interrupted`, billed for what was delivered.
 */
export interface Drain {
  readonly draining: boolean;
  /** Requests (streams included) not yet answered to the end. */
  readonly inFlight: number;
  /** Starts draining and resolves once no request is left, aborting them after `timeoutMs`. */
  drain(timeoutMs: number): Promise<void>;
  /** Counts the app's requests and refuses new ones while draining (buildApp calls it first). */
  install(app: FastifyInstance): void;
  /**
   * Runs work the server does as a request of its own (a batch line) as the app's requests run:
   * counted in flight, refused while draining (ServerShuttingDown), its signal aborted with
   * ServerShuttingDown when the drain stops waiting.
   */
  run<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T>;
}

/** After the abort, how long the aborted requests get to write their error and end. */
const ABORT_GRACE_MS = 5_000;

const shutdownSignals = new WeakMap<FastifyRequest, AbortSignal>();

/** The signal that fires when the server gives up waiting for `request` (none outside a draining app). */
export function shutdownSignalOf(request: FastifyRequest): AbortSignal | undefined {
  return shutdownSignals.get(request);
}

export function createDrain(): Drain {
  const shutdown = new AbortController();
  // Every request in flight listens on it (http/runs.ts) and stops listening when it ends: many
  // listeners at once are the server's concurrency, not a leak, so Node's warning past 10 is off.
  setMaxListeners(0, shutdown.signal);
  let draining = false;
  let inFlight = 0;
  let settled: (() => void) | null = null;
  const leave = () => {
    inFlight--;
    if (inFlight === 0) settled?.();
  };
  const install = (app: FastifyInstance) =>
    app.addHook("onRequest", (request, reply, done) => {
      // /health keeps answering, so a load balancer sees "draining" rather than a refusal.
      if (draining && request.routeOptions.url !== "/health") return done(new ServerShuttingDown());
      shutdownSignals.set(request, shutdown.signal);
      inFlight++;
      // The raw response's close covers hijacked streams too (Fastify's onResponse does not run for them).
      reply.raw.once("close", leave);
      done();
    });
  const idle = () => new Promise<void>((resolve) => (inFlight === 0 ? resolve() : (settled = resolve)));
  const within = (work: Promise<void>, ms: number) => Promise.race([work, new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]);
  return {
    install,
    async run(work) {
      if (draining) throw new ServerShuttingDown();
      inFlight++;
      // Its own controller: one left listening on the server-wide signal would be kept until the server stops.
      const controller = new AbortController();
      const onShutdown = () => controller.abort(shutdown.signal.reason);
      shutdown.signal.addEventListener("abort", onShutdown, { once: true });
      try {
        return await work(controller.signal);
      } finally {
        shutdown.signal.removeEventListener("abort", onShutdown);
        leave();
      }
    },
    get draining() {
      return draining;
    },
    get inFlight() {
      return inFlight;
    },
    async drain(timeoutMs) {
      draining = true;
      const done = idle();
      await within(done, timeoutMs);
      if (inFlight === 0) return;
      shutdown.abort(new ServerShuttingDown());
      await within(done, ABORT_GRACE_MS);
    },
  };
}
