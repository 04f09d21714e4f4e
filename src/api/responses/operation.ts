/**
 * `POST /responses`, the Responses API on the chat lifecycle: the request becomes a chat input, the
 * run's events become output items (and, streamed, typed events). Stored responses belong to one
 * account; `previous_response_id` continues one of the caller's.
 */
import { InvalidRequest, ServiceError } from "../../errors.js";
import { stringifyJson } from "../../protocol/money-json.js";
import { responsesRequestSchema, type ResponsesRequestBody } from "../../protocol/responses-request.js";
import type { Caller, ChatMessage, ChatRun, ChatService } from "../../serving/types.js";
import type { Chunk, Operation, OperationContext, OperationSpec } from "../operation.js";
import { chainedInputItems } from "./input-items.js";
import { toResponsesChatInput } from "./input-mapping.js";
import { ResponseBuilder } from "./response-builder.js";
import type { ResponseStore, StoredResponse } from "./response-store.js";
import { UNFINISHED_STATUSES, type BackgroundResponses } from "./background.js";

export const responsesSpec: OperationSpec<ResponsesRequestBody> = {
  method: "post",
  path: "/responses",
  id: "createResponse",
  summary: "Create a response (Responses API)",
  auth: "key",
  body: responsesRequestSchema,
  response: { description: "A response object, or typed server-sent events (response.created … response.completed).", streams: true },
  batchable: true,
  errors: [400, 401, 402, 404, 429, 503],
  kind: "responses",
  traceOperation: "chat",
};

type Save = (builder: ResponseBuilder, response: unknown) => Promise<void>;

/** `background`: where background responses run; absent (a server that keeps none), `background: true` is refused. */
export function responsesOperation(
  chat: ChatService,
  store: ResponseStore,
  background?: BackgroundResponses,
): Operation<ResponsesRequestBody> {
  return {
    ...responsesSpec,
    async run(caller, body, context) {
      if (body.background && !background) {
        throw new InvalidRequest(
          "background=true is not supported by this server. Omit 'background' (or set it to false).",
          "background",
          "unsupported_parameter",
        );
      }
      const earlier = await previousResponse(store, caller, body.previous_response_id);
      const { input, conversation } = toResponsesChatInput(body, earlier?.conversation ?? []);
      if (background && body.background)
        return background.create(caller, body, { input, conversation, inputItems: chainedInputItems(earlier, body.input) }, context);
      const run = await chat.start(caller, input, context.signal, {
        requestId: context.requestId,
        api: "responses",
        output: context.output,
        trace: context.trace,
      });
      const save = responseSaver(caller, run, context, { store, body, earlier, conversation });
      if (body.stream) return streamed(run, body, save);
      return { type: "json", body: await response(run, body, save), rateLimits: run.rateLimits };
    },
  };
}

/** The response as JSON text, once stored; null when the run was cancelled (the client is gone). */
async function response(run: ChatRun, body: ResponsesRequestBody, save: Save): Promise<string | null> {
  const builder = new ResponseBuilder(run, body);
  for await (const event of run.events) {
    const response = builder.apply(event);
    if (response) {
      await save(builder, response);
      return stringifyJson(response);
    }
  }
  return null;
}

/** Keeps the response (unless `store: false`), chained to the one it continues; a failure marks the run undelivered. */
function responseSaver(
  caller: Caller,
  run: ChatRun,
  context: OperationContext,
  kept: { store: ResponseStore; body: ResponsesRequestBody; earlier: StoredResponse | null; conversation: ChatMessage[] },
): Save {
  const { store, body, earlier, conversation } = kept;
  return async (builder, response) => {
    if (body.store === false) return;
    try {
      const inputItems = chainedInputItems(earlier, body.input);
      await store.save(caller.accountId, run.id, {
        conversation: [...conversation, builder.assistantMessage()],
        body: stringifyJson(response),
        inputItems,
      });
    } catch (error) {
      // The client gets an error instead of the response, so its ledger row must not say completed.
      await run
        .undelivered("response_not_stored")
        .catch((failure: unknown) => context.logError("could not mark the ledger row failed", failure));
      throw error;
    }
  };
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
  // Its conversation has no answer yet to continue from.
  if (stored.status && UNFINISHED_STATUSES.has(stored.status))
    throw new InvalidRequest(
      `Previous response with id '${id}' is still ${stored.status}; continue from it once it has finished.`,
      "previous_response_id",
      "previous_response_not_finished",
    );
  return stored;
}

/** Typed events, numbered; a failure is an `error` event numbered after the last one sent. No `[DONE]`. */
function streamed(run: ChatRun, body: ResponsesRequestBody, save: Save) {
  const numbering = { next: 0 };
  return {
    type: "stream" as const,
    chunks: events(run, body, save, numbering),
    rateLimits: run.rateLimits,
    doneSentinel: false,
    failure: (error: { error: object }): Chunk => ({
      event: "error",
      data: { ...error.error, type: "error", sequence_number: numbering.next },
    }),
  };
}

async function* events(run: ChatRun, body: ResponsesRequestBody, save: Save, numbering: { next: number }): AsyncGenerator<Chunk> {
  const pending: Chunk[] = [];
  let final: Chunk | null = null;
  const builder = new ResponseBuilder(run, body, (type, payload) => {
    numbering.next = (payload.sequence_number as number) + 1;
    // The last event waits until the response is stored, so a client may continue from it at once.
    if (type === "response.completed" || type === "response.incomplete") final = { event: type, data: payload };
    else pending.push({ event: type, data: payload });
  });
  builder.started();
  yield* pending.splice(0);
  for await (const event of run.events) {
    const response = builder.apply(event);
    yield* pending.splice(0);
    if (response && final) {
      await save(builder, response);
      yield final;
    }
  }
}
