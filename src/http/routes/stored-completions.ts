import type { FastifyInstance, FastifyReply } from "fastify";
import type { CompletionStore, StoredCompletion } from "../../api/chat/completion-store.js";
import { InvalidRequest, NotFound } from "../../errors.js";
import { listPageQuery, pageOf, unknownCursor } from "../../protocol/list-page.js";
import { callerOf } from "../auth.js";
import { route, type RouteSpec } from "../route-spec.js";
import { parse } from "../parse-input.js";
import { completionMetadataFilter, listCompletionsQuery, updateCompletionBody } from "../../protocol/stored-completions-request.js";

const completionId = [{ name: "id", description: "The chat completion's id (`chatcmpl-…`)." }];

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const storedCompletionOperations = {
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
} satisfies Record<string, RouteSpec>;

const notFound = (id: string) =>
  new NotFound(`No chat completion with id '${id.slice(0, 64)}' found. Only completions created with store: true are kept.`);

/** The stored completion as OpenAI returns it: the completion as sent, with its current metadata. */
const wireText = (c: StoredCompletion): string => `${c.body.replace(/}\s*$/, "")},"metadata":${JSON.stringify(c.metadata)}}`;
const sendJson = (reply: FastifyReply, text: string) => reply.type("application/json; charset=utf-8").send(text);

/**
 * `store: true` chat completions, as OpenAI serves them: retrieve, list (`model`, `metadata[k]=v`,
 * `after`, `limit`, `order`), update metadata, delete, and list the request's messages. Every
 * lookup is the caller's account's.
 */
export function storedCompletionRoutes(app: FastifyInstance, store: CompletionStore): void {
  route(app, storedCompletionOperations.listChatCompletions, async (request, reply) => {
    const raw = (request.query ?? {}) as Record<string, unknown>;
    // Filters reach SQL as text: the same rules as stored metadata (no NUL, bounded keys and values).
    const { metadata } = parse(completionMetadataFilter, { metadata: metadataFilters(raw) });
    const query = parse(listCompletionsQuery, Object.fromEntries(Object.entries(raw).filter(([key]) => !key.startsWith("metadata"))));
    const rows = await store.list(callerOf(request).accountId, { ...query, metadata });
    if (!rows) throw unknownCursor("chat completion", query.after!);
    const data = rows.slice(0, query.limit);
    const rest = JSON.stringify({
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: rows.length > query.limit,
    }).slice(1);
    // The completions go in as stored text, so their costs stay exact decimals.
    return sendJson(reply, `{"object":"list","data":[${data.map(wireText).join(",")}],${rest}`);
  });

  route<{ Params: { id: string } }>(app, storedCompletionOperations.getChatCompletion, async (request, reply) => {
    const found = await store.get(callerOf(request).accountId, request.params.id);
    if (!found) throw notFound(request.params.id);
    return sendJson(reply, wireText(found));
  });

  route<{ Params: { id: string } }>(app, storedCompletionOperations.updateChatCompletion, async (request, reply) => {
    const body = parse(updateCompletionBody, request.body ?? {});
    const updated = await store.setMetadata(callerOf(request).accountId, request.params.id, body.metadata ?? {});
    if (!updated) throw notFound(request.params.id);
    return sendJson(reply, wireText(updated));
  });

  route<{ Params: { id: string } }>(app, storedCompletionOperations.deleteChatCompletion, async (request) => {
    if (!(await store.delete(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    return { id: request.params.id, object: "chat.completion.deleted", deleted: true };
  });

  route<{ Params: { id: string } }>(app, storedCompletionOperations.listChatCompletionMessages, async (request) => {
    const query = parse(listPageQuery("asc"), request.query ?? {});
    const found = await store.get(callerOf(request).accountId, request.params.id);
    if (!found) throw notFound(request.params.id);
    const page = pageOf(
      found.messages.map((m, i) => toStoreMessage(found.id, m, i)),
      query,
    );
    if (!page) throw unknownCursor("message in this completion", query.after!);
    return page;
  });
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
