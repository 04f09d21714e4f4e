/**
 * Stored responses: retrieve (or follow a background one's events), cancel, input items, delete;
 * each only the caller's account's. Beside the operation that stores them (operation.ts).
 */
import { InvalidRequest, NotFound } from "../../errors.js";
import { listPageQuery, pageOf, unknownCursor, type ListPageQuery } from "../../protocol/list-page.js";
import { events, json, jsonText, type Endpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";
import { UNFINISHED_STATUSES, type BackgroundResponses } from "./background.js";
import type { ResponseStore } from "./response-store.js";

const responseId = [{ name: "id", description: "The response's id (`resp_…`)." }];

export const storedResponseSpecs = {
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
} satisfies Record<string, EndpointSpec>;

const notFound = (id: string) => new NotFound(`No response with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

type ById<Query = unknown> = EndpointInput<{ id: string }, Query>;
/** `stream=true` (or 1): the events; `startingAfter`: the sequence number they start after (-1: from the first). */
interface GetQuery {
  stream: boolean;
  startingAfter: number;
}

export function storedResponseEndpoints(store: ResponseStore, background?: BackgroundResponses): Endpoint[] {
  const get: Endpoint<ById<GetQuery>> = {
    ...storedResponseSpecs.getResponse,
    parseQuery: parseGetQuery,
    async run(caller, { params, query }) {
      const stored = await store.get(caller.accountId, params.id);
      if (!stored) throw notFound(params.id);
      if (!query.stream) return jsonText(stored.body);
      // openai-node's retrieve(id, {stream: true}) would otherwise get JSON and yield nothing, silently.
      if (!stored.status || !background)
        throw new InvalidRequest(
          "Only a response created with background=true can be streamed again (stream=true); retrieve this one without stream.",
          "stream",
          "stream_not_supported",
        );
      // The client may leave at any time; the response runs on.
      return events((signal) => background.follow(caller.accountId, params.id, query.startingAfter, signal));
    },
  };
  const cancel: Endpoint<ById> = {
    ...storedResponseSpecs.cancelResponse,
    async run(caller, { params }) {
      const stored = await store.get(caller.accountId, params.id);
      if (!stored) throw notFound(params.id);
      if (!stored.status || !background)
        throw new InvalidRequest("Only responses created with background=true can be cancelled.", null, "not_cancellable");
      if (UNFINISHED_STATUSES.has(stored.status)) await background.cancel(caller.accountId, params.id);
      return jsonText(((await store.get(caller.accountId, params.id)) ?? stored).body);
    },
  };
  // Paginated as OpenAI's (`after`, `limit`, `order`, default newest first).
  const inputItems: Endpoint<ById<ListPageQuery>> = {
    ...storedResponseSpecs.listResponseInputItems,
    async run(caller, { params, query }) {
      const stored = await store.get(caller.accountId, params.id);
      if (!stored) throw new NotFound(`No response with id '${params.id.slice(0, 64)}' found.`);
      const page = pageOf(stored.inputItems, query);
      if (!page) throw unknownCursor("input item in this response", query.after!);
      return json(page);
    },
  };
  const remove: Endpoint<ById> = {
    ...storedResponseSpecs.deleteResponse,
    async run(caller, { params }) {
      background?.stop(caller.accountId, params.id);
      if (!(await store.delete(caller.accountId, params.id))) throw notFound(params.id);
      return json({ id: params.id, object: "response", deleted: true });
    },
  };
  return [get, remove, inputItems, cancel];
}

/** `starting_after` is read only with `stream`, as before: without it the parameter means nothing. */
function parseGetQuery(raw: Record<string, unknown>): GetQuery {
  const stream = ["true", "1"].includes(String(raw.stream));
  return { stream, startingAfter: stream ? startingAfter(raw.starting_after) : -1 };
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
