/**
 * One span per API request that generates or embeds, when tracing is on: started as the request
 * arrives (the child of its `traceparent`, if any), handed to serving with the run, and ended with
 * the response's status once the response is over (a stream's last event, or the client gone).
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { OperationSpec } from "../api/operation.js";
import type { TracedRequest, Tracing } from "../observability/tracing.js";
import type { RequestTrace } from "../serving/ports.js";

const traces = new WeakMap<FastifyRequest, TracedRequest>();

declare module "fastify" {
  interface FastifyContextConfig {
    /** The GenAI operation the route's span names (its declaration's `traceOperation`); absent: not traced. */
    traceOperation?: OperationSpec["traceOperation"];
  }
}

/** Traces the POSTs of `scope`'s generation and embedding routes. */
export function installTracing(scope: FastifyInstance, tracing: Tracing): void {
  scope.addHook("onRequest", async (request, reply) => {
    const operation = request.routeOptions.config?.traceOperation;
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
