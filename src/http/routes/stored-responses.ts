import type { FastifyInstance } from "fastify";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ResponseStore } from "../../api/responses/response-store.js";
import { UNFINISHED_STATUSES, type BackgroundResponses } from "../../api/responses/background.js";
import { InvalidRequest, NotFound, toErrorBody } from "../../errors.js";
import { listPageQuery, pageOf, unknownCursor } from "../../protocol/list-page.js";
import { callerOf } from "../auth.js";
import { parse } from "../../protocol/parse-input.js";
import { route, type RouteSpec } from "../route-spec.js";
import { abortOnDisconnect, midStreamFailure } from "../runs.js";
import { openSse } from "../sse.js";

const responseId = [{ name: "id", description: "The response's id (`resp_…`)." }];

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const storedResponseOperations = {
  getResponse: {
    method: "get",
    path: "/responses/{id}",
    id: "getResponse",
    summary:
      "A stored response of the caller's account; a background one as it stands now. With stream=true (background responses only), its events after starting_after, then live ones until it ends",
    auth: "key",
    pathParams: responseId,
    query: [
      { name: "stream", description: "true: the background response's events as server-sent events." },
      {
        name: "starting_after",
        description: "With stream=true, the sequence number after which events are sent (default: from the first).",
      },
    ],
    response: { description: "The response object (as it was returned, or as a background one stands), or its events." },
    errors: [400, 401, 404],
  },
  deleteResponse: {
    method: "delete",
    path: "/responses/{id}",
    id: "deleteResponse",
    summary: "Delete a stored response",
    auth: "key",
    pathParams: responseId,
    response: { description: '`{id, object: "response", deleted: true}`' },
    errors: [401, 404],
  },
  listResponseInputItems: {
    method: "get",
    path: "/responses/{id}/input_items",
    id: "listResponseInputItems",
    summary:
      "What a stored response was generated from (with previous_response_id, the earlier responses' input and output first), with ids; newest first unless order=asc",
    auth: "key",
    pathParams: responseId,
    query: listPageQuery("desc"),
    response: { description: '`{object: "list", data: [item], first_id, last_id, has_more}`' },
    errors: [400, 401, 404],
  },
  cancelResponse: {
    method: "post",
    path: "/responses/{id}/cancel",
    id: "cancelResponse",
    summary:
      "Cancel a background response; one already ended is returned as it is (a second cancel changes nothing). 400 for a response not created with background=true, 404 for an unknown id",
    auth: "key",
    pathParams: responseId,
    response: { description: "The response object, `cancelled` unless it had ended before." },
    errors: [400, 401, 404],
  },
} satisfies Record<string, RouteSpec>;

const notFound = (id: string) => new NotFound(`No response with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/** Stored responses: retrieve (or follow a background one's events), cancel, input items, delete; each only the caller's account's. */
export function storedResponseRoutes(app: FastifyInstance, store: ResponseStore, background?: BackgroundResponses): void {
  route<{ Params: { id: string }; Querystring: { stream?: unknown; starting_after?: unknown } }>(
    app,
    storedResponseOperations.getResponse,
    async (request, reply) => {
      const stream = ["true", "1"].includes(String(request.query?.stream));
      const stored = await store.get(callerOf(request).accountId, request.params.id);
      if (!stored) throw notFound(request.params.id);
      if (!stream) return reply.type("application/json; charset=utf-8").send(stored.body);
      // openai-node's retrieve(id, {stream: true}) would otherwise get JSON and yield nothing, silently.
      if (!stored.status || !background)
        throw new InvalidRequest(
          "Only a response created with background=true can be streamed again (stream=true); retrieve this one without stream.",
          "stream",
          "stream_not_supported",
        );
      await followEvents(background, request, reply, startingAfter(request.query.starting_after));
      return undefined;
    },
  );

  route<{ Params: { id: string } }>(app, storedResponseOperations.cancelResponse, async (request, reply) => {
    const accountId = callerOf(request).accountId;
    const stored = await store.get(accountId, request.params.id);
    if (!stored) throw notFound(request.params.id);
    if (!stored.status || !background)
      throw new InvalidRequest("Only responses created with background=true can be cancelled.", null, "not_cancellable");
    if (UNFINISHED_STATUSES.has(stored.status)) await background.cancel(accountId, request.params.id);
    const now = (await store.get(accountId, request.params.id)) ?? stored;
    return reply.type("application/json; charset=utf-8").send(now.body);
  });

  responseInputItemRoutes(app, store);

  route<{ Params: { id: string } }>(app, storedResponseOperations.deleteResponse, async (request) => {
    const accountId = callerOf(request).accountId;
    background?.stop(accountId, request.params.id);
    if (!(await store.delete(accountId, request.params.id))) throw notFound(request.params.id);
    return { id: request.params.id, object: "response", deleted: true };
  });
}

function startingAfter(value: unknown): number {
  if (value === undefined || value === "") return -1;
  const after = Number(value);
  // A sequence number is a 32-bit integer in storage: a larger one would fail the query, not match nothing.
  if (!Number.isInteger(after) || after < -1 || after > 2 ** 31 - 1)
    throw new InvalidRequest(
      "'starting_after' must be an event's sequence number (an integer, 0 or more).",
      "starting_after",
      "invalid_value",
    );
  return after;
}

/** The background response's events as server-sent events; the client may leave at any time, the response runs on. */
async function followEvents(
  background: BackgroundResponses,
  request: FastifyRequest<{ Params: { id: string } }>,
  reply: FastifyReply,
  after: number,
) {
  const signal = abortOnDisconnect(reply);
  const sse = openSse(reply);
  try {
    for await (const chunk of background.follow(callerOf(request).accountId, request.params.id, after, signal))
      sse.event(chunk.event ?? "message", chunk.data);
  } catch (error) {
    sse.event("error", { ...toErrorBody(midStreamFailure(request, error)).error, type: "error" });
  }
  sse.end();
}

/** `GET /responses/{id}/input_items`: paginated as OpenAI's (`after`, `limit`, `order`, default newest first). */
function responseInputItemRoutes(app: FastifyInstance, store: ResponseStore): void {
  route<{ Params: { id: string } }>(app, storedResponseOperations.listResponseInputItems, async (request) => {
    const query = parse(listPageQuery("desc"), request.query ?? {});
    const stored = await store.get(callerOf(request).accountId, request.params.id);
    if (!stored) throw new NotFound(`No response with id '${request.params.id.slice(0, 64)}' found.`);
    const page = pageOf(stored.inputItems, query);
    if (!page) throw unknownCursor("input item in this response", query.after!);
    return page;
  });
}
