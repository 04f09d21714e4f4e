/**
 * One span per API request that generates or embeds, when tracing is on: started as the request
 * arrives (the child of its `traceparent`, if any), handed to serving with the run, and ended with
 * the response's status once the response is over (a stream's last event, or the client gone).
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { TracedRequest, Tracing } from "../observability/tracing.js";
import type { RequestTrace } from "../serving/ports.js";

const traces = new WeakMap<FastifyRequest, TracedRequest>();

/** The GenAI operation a route runs, by its path under an API prefix; null: not traced. */
function operationOf(routeUrl: string | undefined): string | null {
  if (!routeUrl) return null;
  if (routeUrl.endsWith("/chat/completions") || routeUrl.endsWith("/responses")) return "chat";
  if (routeUrl.endsWith("/completions")) return "text_completion";
  return routeUrl.endsWith("/embeddings") ? "embeddings" : null;
}

/** Traces the POSTs of `scope`'s generation and embedding routes. */
export function installTracing(scope: FastifyInstance, tracing: Tracing): void {
  scope.addHook("onRequest", async (request, reply) => {
    const operation = request.method === "POST" ? operationOf(request.routeOptions.url) : null;
    if (!operation) return;
    const traced = tracing.request(operation, request.headers);
    traces.set(request, traced);
    reply.raw.once("close", () => traced.end(reply.raw.statusCode));
  });
}

/** The request's trace for serving; undefined when tracing is off. */
export function traceOf(request: FastifyRequest): RequestTrace | undefined {
  return traces.get(request);
}
