import type { FastifyInstance } from "fastify";
import type { ResponseStore } from "../../api/responses/response-store.js";
import { InvalidRequest, NotFound } from "../../errors.js";
import { listPageQuery, pageOf, unknownCursor } from "../../protocol/list-page.js";
import { callerOf } from "../auth.js";
import { parse } from "../parse-input.js";
import { route, type RouteSpec } from "../route-spec.js";

const responseId = [{ name: "id", description: "The response's id (`resp_…`)." }];

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const storedResponseOperations = {
  getResponse: {
    method: "get",
    path: "/responses/{id}",
    id: "getResponse",
    summary: "A stored response of the caller's account",
    auth: "key",
    pathParams: responseId,
    response: { description: "The response object as it was returned." },
    errors: [401, 404],
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
    summary: "Cancel a background response (none run in the background here: 400 for a stored response, 404 for an unknown id)",
    auth: "key",
    pathParams: responseId,
    response: { description: "Never succeeds: no response runs in the background." },
    errors: [400, 401, 404],
  },
} satisfies Record<string, RouteSpec>;

const notFound = (id: string) => new NotFound(`No response with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/** Stored responses: retrieve, cancel (none can be), input items, delete; each only the caller's account's. */
export function storedResponseRoutes(app: FastifyInstance, store: ResponseStore): void {
  route<{ Params: { id: string }; Querystring: { stream?: unknown } }>(
    app,
    storedResponseOperations.getResponse,
    async (request, reply) => {
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
    },
  );

  // Only background responses can be cancelled, and none are: every response here runs in its request.
  route<{ Params: { id: string } }>(app, storedResponseOperations.cancelResponse, async (request) => {
    if (!(await store.get(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    throw new InvalidRequest(
      "Only responses created with background=true can be cancelled; this server runs none in the background.",
      null,
      "not_cancellable",
    );
  });

  responseInputItemRoutes(app, store);

  route<{ Params: { id: string } }>(app, storedResponseOperations.deleteResponse, async (request) => {
    if (!(await store.delete(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    return { id: request.params.id, object: "response", deleted: true };
  });
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
