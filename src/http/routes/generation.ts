/**
 * The routes of the operations that generate or embed (api/registry.ts): the route adapter's parse
 * (endpoint-routes.ts `inputOf`) reads the body with the operation's declared schema, and the
 * operation runs as the caller; its answer is written as JSON or server-sent events. Registered
 * under each API prefix (see app.ts), so the paths are relative to it.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Chunk, Operation, OperationResult } from "../../api/operation.js";
import { toErrorBody } from "../../errors.js";
import { tellRateLimits } from "../rate-limit-headers.js";
import { COMPAT_PREFIX } from "../api-paths.js";
import { callerOf } from "../auth.js";
import { inputOf } from "../endpoint-routes.js";
import { route } from "../route-spec.js";
import { abortOnDisconnect, midStreamFailure } from "../runs.js";
import { OutputGate, openSse, type SseWriter, type StreamLimits } from "../sse.js";
import { traceOf } from "../tracing.js";

export function generationRoutes(app: FastifyInstance, operations: Iterable<Operation>, limits: StreamLimits): void {
  // The specification's `/v1/compat` sends a streamed chat's `role` in every chunk.
  const roleInEveryChunk = app.prefix === COMPAT_PREFIX;
  for (const operation of operations)
    route(
      app,
      operation,
      (request, reply) => answer(operation, inputOf(operation, request).body, request, reply, { limits, roleInEveryChunk }),
      // Read by the tracing hook (tracing.ts), where the scope is traced.
      { config: { traceOperation: operation.traceOperation } },
    );
}

async function answer(
  operation: Operation,
  body: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
  { limits, roleInEveryChunk }: { limits: StreamLimits; roleInEveryChunk: boolean },
) {
  const gate = new OutputGate();
  const result = await operation.run(callerOf(request), body, {
    signal: abortOnDisconnect(reply),
    requestId: request.id,
    output: gate,
    trace: traceOf(request),
    roleInEveryChunk,
    logError: (message, error) => request.log.error({ err: error }, message),
  });
  // Set before a stream's head is written (sse.ts copies the reply's headers), so streams carry them too.
  tellRateLimits(reply, result.rateLimits);
  if (result.type === "json") {
    // Null: the run was cancelled, its client is gone; nobody to answer.
    return result.body === null ? reply : reply.type("application/json; charset=utf-8").send(result.body);
  }
  await writeStream(result, openSse(reply, { gate, limits }), request);
  return undefined;
}

/** The chunks as events; a failure after the head was sent travels as the operation's failure event. */
async function writeStream(result: Extract<OperationResult, { type: "stream" }>, sse: SseWriter, request: FastifyRequest) {
  const write = (chunk: Chunk) => (chunk.event === undefined ? sse.send(chunk.data) : sse.event(chunk.event, chunk.data));
  try {
    for await (const chunk of result.chunks) write(chunk);
  } catch (error) {
    write(result.failure(toErrorBody(midStreamFailure(request, error))));
  }
  if (result.doneSentinel) sse.done();
  else sse.end();
}
