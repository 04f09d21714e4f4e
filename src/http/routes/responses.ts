import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { stringifyJson } from "../../protocol/money-json.js";
import { InvalidRequest, NotFound, ServiceError } from "../../errors.js";
import { responsesRequestSchema, type ResponsesRequestBody } from "../../protocol/responses-request.js";
import type { ResponseStore, StoredResponse } from "../../responses/response-store.js";
import type { Caller, ChatMessage, ChatRun, ChatService } from "../../serving/types.js";
import { callerOf } from "../auth.js";
import { parseRequest } from "../chat-input.js";
import { toErrorBody } from "../errors.js";
import { ResponseBuilder } from "../../responses/response-builder.js";
import { toResponsesChatInput } from "../../responses/chat-input-mapping.js";
import { chainedInputItems, responseInputItemRoutes } from "../response-items.js";
import { exposeRateLimits } from "../rate-limit-headers.js";
import { OutputGate, openSse, type SseWriter, type StreamLimits } from "../sse.js";
import { traceOf } from "../tracing.js";
import { abortOnDisconnect, midStreamFailure } from "../runs.js";

const notFound = (id: string) => new NotFound(`No response with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/**
 * The Responses API on the chat lifecycle: the request becomes a chat input, the run's events
 * become output items (and, streamed, typed events). Stored responses belong to one account.
 */
export function responsesRoutes(app: FastifyInstance, chat: ChatService, store: ResponseStore, limits: StreamLimits): void {
  app.post("/responses", (request, reply) => createResponse(request, reply, { chat, store, limits }));
  storedResponseRoutes(app, store);
}

async function createResponse(
  request: FastifyRequest,
  reply: FastifyReply,
  { chat, store, limits }: { chat: ChatService; store: ResponseStore; limits: StreamLimits },
): Promise<FastifyReply | undefined> {
  const body = parseRequest(responsesRequestSchema, request.body);
  if (body.background) {
    // Accepted and run in the foreground, a later cancel or stream=true retrieve would be refused: say so now.
    throw new InvalidRequest(
      "background=true is not supported: this server runs every response within its request. Omit 'background' (or set it to false).",
      "background",
      "unsupported_parameter",
    );
  }
  const caller = callerOf(request);
  const earlier = await previousResponse(store, caller, body.previous_response_id);
  const { input, conversation } = toResponsesChatInput(body, earlier?.conversation ?? []);
  const gate = new OutputGate();
  const run = await chat.start(caller, input, abortOnDisconnect(reply), {
    requestId: request.id,
    api: "responses",
    output: gate,
    trace: traceOf(request),
  });
  exposeRateLimits(reply, run);
  const save = responseSaver(request, run, { store, body, earlier, conversation });
  if (body.stream) {
    await streamResponse(run, body, openSse(reply, { gate, limits }), request, save);
    return undefined;
  }
  const builder = new ResponseBuilder(run, body);
  for await (const event of run.events) {
    const response = builder.apply(event);
    if (response) {
      await save(builder, response);
      return reply.type("application/json; charset=utf-8").send(stringifyJson(response));
    }
  }
  return reply; // cancelled: the client is gone
}

/** Keeps the response (unless `store: false`), chained to the one it continues; a failure marks the run undelivered. */
function responseSaver(
  request: FastifyRequest,
  run: ChatRun,
  context: { store: ResponseStore; body: ResponsesRequestBody; earlier: StoredResponse | null; conversation: ChatMessage[] },
) {
  const { store, body, earlier, conversation } = context;
  return async (builder: ResponseBuilder, response: unknown): Promise<void> => {
    if (body.store === false) return;
    try {
      const inputItems = chainedInputItems(earlier, body.input);
      await store.save(callerOf(request).accountId, run.id, {
        conversation: [...conversation, builder.assistantMessage()],
        body: stringifyJson(response),
        inputItems,
      });
    } catch (error) {
      // The client gets an error instead of the response, so its ledger row must not say completed.
      await run
        .undelivered("response_not_stored")
        .catch((failure: unknown) => request.log.error({ err: failure }, "could not mark the ledger row failed"));
      throw error;
    }
  };
}

/** Stored responses: retrieve, cancel (none can be), input items, delete; each only the caller's account's. */
function storedResponseRoutes(app: FastifyInstance, store: ResponseStore): void {
  app.get<{ Params: { id: string }; Querystring: { stream?: unknown } }>("/responses/:id", async (request, reply) => {
    // openai-node's retrieve(id, {stream: true}) would otherwise get JSON and yield nothing, silently.
    if (["true", "1"].includes(String(request.query?.stream)))
      throw new InvalidRequest(
        "Streaming a stored response (stream=true) is only for background responses; this server runs none in the background. Retrieve it without stream.",
        "stream",
        "stream_not_supported",
      );
    const stored = await store.get(callerOf(request).accountId, request.params.id);
    if (!stored) throw notFound(request.params.id);
    return reply.type("application/json; charset=utf-8").send(stored.body);
  });

  // Only background responses can be cancelled, and none are: every response here runs in its request.
  app.post<{ Params: { id: string } }>("/responses/:id/cancel", async (request) => {
    if (!(await store.get(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    throw new InvalidRequest(
      "Only responses created with background=true can be cancelled; this server runs none in the background.",
      null,
      "not_cancellable",
    );
  });

  responseInputItemRoutes(app, store);

  app.delete<{ Params: { id: string } }>("/responses/:id", async (request) => {
    if (!(await store.delete(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    return { id: request.params.id, object: "response", deleted: true };
  });
}

async function previousResponse(store: ResponseStore, caller: Caller, id: string | null | undefined): Promise<StoredResponse | null> {
  if (!id) return null;
  const stored = await store.get(caller.accountId, id);
  if (!stored)
    throw new ServiceError(
      404,
      "invalid_request_error",
      `Previous response with id '${id}' not found.`,
      "previous_response_not_found",
      "previous_response_id",
    );
  return stored;
}

async function streamResponse(
  run: ChatRun,
  body: ResponsesRequestBody,
  sse: SseWriter,
  request: FastifyRequest,
  save: (builder: ResponseBuilder, response: unknown) => Promise<void>,
): Promise<void> {
  let sequence = 0;
  let final: { type: string; payload: Record<string, unknown> } | null = null;
  const builder = new ResponseBuilder(run, body, (type, payload) => {
    sequence = (payload.sequence_number as number) + 1;
    // The last event waits until the response is stored, so a client may continue from it at once.
    if (type === "response.completed" || type === "response.incomplete") final = { type, payload };
    else sse.event(type, payload);
  });
  try {
    builder.started();
    for await (const event of run.events) {
      const response = builder.apply(event);
      if (response && final) {
        await save(builder, response);
        const { type, payload } = final;
        sse.event(type, payload);
      }
    }
  } catch (error) {
    sse.event("error", { ...toErrorBody(midStreamFailure(request, error)).error, type: "error", sequence_number: sequence });
  }
  sse.end();
}
