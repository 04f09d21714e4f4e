/**
 * What every route that runs a generation shares (chat, legacy completions, responses, embeddings):
 * the run is aborted when its client goes away, and a failure after the headers were sent travels
 * as an error event.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { ServiceError } from "../errors.js";
import { shutdownSignalOf } from "./drain.js";

/**
 * Aborts the generation as soon as the client goes away, so its sequence is freed at once; and
 * when a shutdown stops waiting for it, with that reason (ServerShuttingDown), so the run ends
 * with an error the client is told of and its row says `interrupted`.
 */
export function abortOnDisconnect(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  const shutdown = shutdownSignalOf(reply.request);
  const onShutdown = () => controller.abort(shutdown!.reason);
  shutdown?.addEventListener("abort", onShutdown, { once: true });
  reply.raw.once("close", () => {
    // The server-wide signal outlives every request: left on it, this listener would keep the
    // request's controller, and all that listens on it (its engine request, its vectors), forever.
    shutdown?.removeEventListener("abort", onShutdown);
    if (!reply.raw.writableFinished) controller.abort(new Error("client disconnected"));
  });
  return controller.signal;
}

/**
 * A generation that failed after its stream began: logged, and returned as the error its client is
 * sent (headers are gone already, so it travels as an event in the shape of an HTTP error body).
 * Anything but a ServiceError is an internal error whose details stay in the log.
 */
export function midStreamFailure(request: FastifyRequest, error: unknown): ServiceError {
  request.log.error({ err: error }, "generation failed mid-stream");
  return error instanceof ServiceError ? error : new ServiceError(500, "server_error", "The generation failed.", "internal_error");
}
