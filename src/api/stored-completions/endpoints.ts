/**
 * `store: true` chat completions, as OpenAI serves them: retrieve, list (`model`, `metadata[k]=v`,
 * `after`, `limit`, `order`), update metadata, delete, and list the request's messages. Every
 * lookup is the caller's account's.
 */
import { InvalidRequest, NotFound } from "../../errors.js";
import { listPageQuery, listPageText, pageOf, toListPage, unknownCursor, type ListPageQuery } from "../../protocol/list-page.js";
import { parse } from "../../protocol/parse-input.js";
import { completionMetadataFilter, listCompletionsQuery, updateCompletionBody } from "../../protocol/stored-completions-request.js";
import type { CompletionStore, StoredCompletion } from "../chat/completion-store.js";
import { json, jsonText, type Endpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";

const completionId = [{ name: "id", description: "The chat completion's id (`chatcmpl-…`)." }];

export const storedCompletionSpecs = {
  listChatCompletions: {
    method: "get",
    path: "/chat/completions",
    id: "listChatCompletions",
    summary:
      "The caller's account's stored chat completions (made with store: true), oldest first unless order=desc; `metadata[KEY]=VALUE` filters (every pair must match)",
    auth: "key",
    query: [
      { name: "model", description: "Only this model's." },
      { name: "metadata[KEY]", description: "Only those whose metadata has KEY set to this value (repeatable)." },
      { name: "after", description: "The last id of the previous page." },
      { name: "limit", description: "1 to 100, default 20.", schema: { type: "integer", minimum: 1, maximum: 100 } },
      { name: "order", description: "`asc` (default) or `desc`, by creation.", schema: { type: "string", enum: ["asc", "desc"] } },
    ],
    response: { description: '`{object: "list", data: [chat.completion with metadata], first_id, last_id, has_more}`' },
    errors: [400, 401],
  },
  getChatCompletion: {
    method: "get",
    path: "/chat/completions/{id}",
    id: "getChatCompletion",
    summary: "A stored chat completion of the caller's account",
    auth: "key",
    pathParams: completionId,
    response: { description: "The chat.completion object as it was returned, with its current `metadata`." },
    errors: [401, 404],
  },
  updateChatCompletion: {
    method: "post",
    path: "/chat/completions/{id}",
    id: "updateChatCompletion",
    summary: "Replace a stored chat completion's metadata",
    auth: "key",
    pathParams: completionId,
    body: updateCompletionBody,
    response: { description: "The chat.completion object with its new `metadata`." },
    errors: [400, 401, 404],
  },
  deleteChatCompletion: {
    method: "delete",
    path: "/chat/completions/{id}",
    id: "deleteChatCompletion",
    summary: "Delete a stored chat completion",
    auth: "key",
    pathParams: completionId,
    response: { description: '`{id, object: "chat.completion.deleted", deleted: true}`' },
    errors: [401, 404],
  },
  listChatCompletionMessages: {
    method: "get",
    path: "/chat/completions/{id}/messages",
    id: "listChatCompletionMessages",
    summary:
      "The messages of a stored chat completion's request, each with an id (`<completion id>-<index>`); oldest first unless order=desc",
    auth: "key",
    pathParams: completionId,
    query: listPageQuery("asc"),
    response: { description: '`{object: "list", data: [message], first_id, last_id, has_more}`' },
    errors: [400, 401, 404],
  },
} satisfies Record<string, EndpointSpec>;

const notFound = (id: string) =>
  new NotFound(`No chat completion with id '${id.slice(0, 64)}' found. Only completions created with store: true are kept.`);

/** The stored completion as OpenAI returns it: the completion as sent, with its current metadata. */
const wireText = (c: StoredCompletion): string => `${c.body.replace(/}\s*$/, "")},"metadata":${JSON.stringify(c.metadata)}}`;

type ById<Query = unknown, Body = unknown> = EndpointInput<{ id: string }, Query, Body>;
type ListQuery = ReturnType<typeof listCompletionsQuery.parse> & { metadata: Record<string, string> };

export function storedCompletionEndpoints(store: CompletionStore): Endpoint[] {
  const list: Endpoint<EndpointInput<unknown, ListQuery>> = {
    ...storedCompletionSpecs.listChatCompletions,
    parseQuery: parseListQuery,
    async run(caller, { query }) {
      const rows = await store.list(caller.accountId, query);
      if (!rows) throw unknownCursor("chat completion", query.after!);
      // The completions go in as stored text, so their costs stay exact decimals.
      return jsonText(listPageText(toListPage(rows, query.limit), wireText));
    },
  };
  const get: Endpoint<ById> = {
    ...storedCompletionSpecs.getChatCompletion,
    async run(caller, { params }) {
      const found = await store.get(caller.accountId, params.id);
      if (!found) throw notFound(params.id);
      return jsonText(wireText(found));
    },
  };
  const update: Endpoint<ById<unknown, { metadata: Record<string, string> | null }>> = {
    ...storedCompletionSpecs.updateChatCompletion,
    async run(caller, { params, body }) {
      const updated = await store.setMetadata(caller.accountId, params.id, body.metadata ?? {});
      if (!updated) throw notFound(params.id);
      return jsonText(wireText(updated));
    },
  };
  const remove: Endpoint<ById> = {
    ...storedCompletionSpecs.deleteChatCompletion,
    async run(caller, { params }) {
      if (!(await store.delete(caller.accountId, params.id))) throw notFound(params.id);
      return json({ id: params.id, object: "chat.completion.deleted", deleted: true });
    },
  };
  const messages: Endpoint<ById<ListPageQuery>> = {
    ...storedCompletionSpecs.listChatCompletionMessages,
    async run(caller, { params, query }) {
      const found = await store.get(caller.accountId, params.id);
      if (!found) throw notFound(params.id);
      const page = pageOf(
        found.messages.map((m, i) => toStoreMessage(found.id, m, i)),
        query,
      );
      if (!page) throw unknownCursor("message in this completion", query.after!);
      return json(page);
    },
  };
  return [list, get, update, remove, messages];
}

/** Filters reach SQL as text: the same rules as stored metadata (no NUL, bounded keys and values). */
function parseListQuery(raw: Record<string, unknown>): ListQuery {
  const { metadata } = parse(completionMetadataFilter, { metadata: metadataFilters(raw) });
  const query = parse(listCompletionsQuery, Object.fromEntries(Object.entries(raw).filter(([key]) => !key.startsWith("metadata"))));
  return { ...query, metadata };
}

/**
 * The `metadata[key]=value` filters of a list query. A filter that cannot be applied as written is
 * a 400 naming it, never dropped (a dropped filter lists everything): a key given twice (which
 * value?), `metadata` without a key, and `__proto__`, which no stored metadata holds.
 */
function metadataFilters(raw: Record<string, unknown>): Record<string, string> {
  const filters: Array<[string, string]> = [];
  for (const [param, value] of Object.entries(raw)) {
    if (!param.startsWith("metadata")) continue;
    const key = /^metadata\[(.+)\]$/.exec(param)?.[1];
    const shown = param.slice(0, 80);
    if (key === undefined)
      throw new InvalidRequest(`Invalid '${shown}': filter on metadata as metadata[key]=value.`, shown, "invalid_value");
    if (typeof value !== "string")
      throw new InvalidRequest(
        `Invalid '${shown}': given more than once; a metadata filter takes one value per key.`,
        shown,
        "invalid_value",
      );
    if (key === "__proto__")
      throw new InvalidRequest(
        `Invalid '${shown}': the key '__proto__' is not accepted (it names an object's prototype).`,
        shown,
        "invalid_value",
      );
    filters.push([key, value]);
  }
  return Object.fromEntries(filters);
}

/** A request message as OpenAI lists it: an id, its text as `content`, and its parts (if it had parts) as `content_parts`. */
function toStoreMessage(completionId: string, message: Record<string, unknown>, index: number): { id: string } & Record<string, unknown> {
  const parts = Array.isArray(message.content) ? (message.content as Array<{ type?: string; text?: string }>) : null;
  const content = parts ? parts.map((p) => (p.type === "text" ? (p.text ?? "") : "")).join("") : (message.content ?? null);
  return { ...message, id: `${completionId}-${index}`, content, content_parts: parts };
}
