/**
 * What every route that runs a generation shares (chat, legacy completions, responses): the run is
 * aborted when its client goes away, usage goes out in one wire shape, and a failure after the
 * headers were sent travels as an error event.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { ServiceError } from "../errors.js";
import type { WireUsage } from "../protocol/chat-response.js";
import { ExactDecimal } from "../protocol/money-json.js";
import type { Usage } from "../serving/types.js";
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

export function toWireUsage(usage: Usage): WireUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    estimated_cost: ExactDecimal.of(usage.cost),
    prompt_tokens_details: { cached_tokens: usage.cachedPromptTokens },
    completion_tokens_details: {
      reasoning_tokens: usage.reasoningTokens,
      accepted_prediction_tokens: usage.acceptedPredictionTokens,
      rejected_prediction_tokens: usage.rejectedPredictionTokens,
    },
  };
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
