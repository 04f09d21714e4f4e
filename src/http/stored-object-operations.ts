import { listPageQuery } from "../protocol/list-page.js";
import { updateCompletionBody } from "../protocol/stored-completions-request.js";
import type { Operation } from "./operation.js";

/**
 * The stored responses' and stored chat completions' operations (routes/responses.ts,
 * routes/stored-completions.ts), declared here until those routes, moving to src/api/, register
 * themselves with their declarations as the other routes do.
 */

const responseId = [{ name: "id", description: "The response's id (`resp_…`)." }];
const completionId = [{ name: "id", description: "The chat completion's id (`chatcmpl-…`)." }];

/** Collected into the OpenAPI document by openapi.ts. */
export const storedObjectOperations = {
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
} satisfies Record<string, Operation>;
