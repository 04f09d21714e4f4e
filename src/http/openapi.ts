import { z } from "zod";
import { OPERATION_SPECS } from "../api/registry.js";
import { detokenizeRequestSchema, tokenizeRequestSchema } from "../protocol/tokenize-request.js";
import { createBatchSchema, listBatchesQuery, listFilesQuery, uploadFileForm } from "../protocol/batches-request.js";
import { API_PREFIXES } from "./api-paths.js";
import { accountCreateKeyBody } from "./routes/account-keys.js";
import { createKeyBody, listKeysQuery, patchKeyBody } from "./routes/admin.js";
import { createDeploymentBody, listDeploymentsQuery, scaleDeploymentBody } from "./routes/deployments.js";
import { uploadAdapterForm } from "./routes/adapters.js";
import { updateCompletionBody } from "./routes/stored-completions.js";
import { listPageQuery } from "../protocol/list-page.js";
import { RATE_LIMIT_HEADER_NAMES } from "../protocol/rate-limit-headers.js";

type Method = "get" | "post" | "patch" | "delete";
type Auth = "key" | "admin" | "none";

interface Operation {
  method: Method;
  path: string;
  id: string;
  summary: string;
  auth: Auth;
  /** The zod schema the route validates its body with. */
  body?: z.ZodType;
  /** The body's media type; default application/json. */
  bodyType?: string;
  /** Query parameters: the zod object the route validates them with, or a list written out. */
  query?: z.ZodObject | Array<{ name: string; description: string; schema?: Record<string, unknown> }>;
  pathParams?: Array<{ name: string; description: string }>;
  response: { description: string; contentType?: string; streams?: boolean };
  errors: number[];
}

/** The same shape every error has (src/http/errors.ts). */
const errorSchema = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }),
});

const responseId = [{ name: "id", description: "The response's id (`resp_…`)." }];
const completionId = [{ name: "id", description: "The chat completion's id (`chatcmpl-…`)." }];
const listPage = (order: "asc" | "desc") => listPageQuery(order);
const deploymentId = [{ name: "id", description: "The deployment's id (`dep_…`)." }];
const fileId = [{ name: "id", description: "The file's id (`file-…`)." }];
const adapterId = [{ name: "id", description: "The adapter's id (`adp_…`)." }];
const batchId = [{ name: "id", description: "The batch's id (`batch_…`)." }];

/** The OpenAI-compatible operations, served under every prefix in API_PREFIXES. */
const API_OPERATIONS: Operation[] = [
  // The operations that generate or embed, as their registry describes them (src/api/registry.ts).
  ...OPERATION_SPECS.map((spec): Operation => ({
    method: spec.method,
    path: spec.path,
    id: spec.id,
    summary: spec.summary,
    auth: "key",
    body: spec.schema,
    response: { description: spec.response, streams: spec.streams },
    errors: spec.errors,
  })),
  {
    method: "post",
    path: "/tokenize",
    id: "tokenize",
    summary:
      "Token ids of a prompt, or of chat messages rendered as a chat request renders them (vLLM's shape; authenticated, counted against the request rate, never billed)",
    auth: "key",
    body: tokenizeRequestSchema,
    response: {
      description: "`{count, max_model_len, tokens, token_strs?}`; for messages, `count` is that chat request's `usage.prompt_tokens`.",
    },
    errors: [400, 401, 404, 429, 503],
  },
  {
    method: "post",
    path: "/detokenize",
    id: "detokenize",
    summary: "Token ids of a model back into text, special tokens spelled out",
    auth: "key",
    body: detokenizeRequestSchema,
    response: { description: "`{prompt}`" },
    errors: [400, 401, 404, 429, 503],
  },
  {
    method: "get",
    path: "/responses/{id}",
    id: "getResponse",
    summary: "A stored response of the caller's account",
    auth: "key",
    pathParams: responseId,
    response: { description: "The response object as it was returned." },
    errors: [401, 404],
  },
  {
    method: "delete",
    path: "/responses/{id}",
    id: "deleteResponse",
    summary: "Delete a stored response",
    auth: "key",
    pathParams: responseId,
    response: { description: '`{id, object: "response", deleted: true}`' },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/responses/{id}/input_items",
    id: "listResponseInputItems",
    summary:
      "What a stored response was generated from (with previous_response_id, the earlier responses' input and output first), with ids; newest first unless order=asc",
    auth: "key",
    pathParams: responseId,
    query: listPage("desc"),
    response: { description: '`{object: "list", data: [item], first_id, last_id, has_more}`' },
    errors: [400, 401, 404],
  },
  {
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
  {
    method: "get",
    path: "/chat/completions/{id}",
    id: "getChatCompletion",
    summary: "A stored chat completion of the caller's account",
    auth: "key",
    pathParams: completionId,
    response: { description: "The chat.completion object as it was returned, with its current `metadata`." },
    errors: [401, 404],
  },
  {
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
  {
    method: "delete",
    path: "/chat/completions/{id}",
    id: "deleteChatCompletion",
    summary: "Delete a stored chat completion",
    auth: "key",
    pathParams: completionId,
    response: { description: '`{id, object: "chat.completion.deleted", deleted: true}`' },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/chat/completions/{id}/messages",
    id: "listChatCompletionMessages",
    summary:
      "The messages of a stored chat completion's request, each with an id (`<completion id>-<index>`); oldest first unless order=desc",
    auth: "key",
    pathParams: completionId,
    query: listPage("asc"),
    response: { description: '`{object: "list", data: [message], first_id, last_id, has_more}`' },
    errors: [400, 401, 404],
  },
  {
    method: "post",
    path: "/responses/{id}/cancel",
    id: "cancelResponse",
    summary: "Cancel a background response (none run in the background here: 400 for a stored response, 404 for an unknown id)",
    auth: "key",
    pathParams: responseId,
    response: { description: "Never succeeds: no response runs in the background." },
    errors: [400, 401, 404],
  },
  {
    method: "post",
    path: "/files",
    id: "createFile",
    summary:
      "Upload a batch input file (multipart/form-data: `file`, `purpose: batch`). Limits: SWITCHYARD_FILE_MAX_BYTES per file (200 MB), SWITCHYARD_FILES_PER_ACCOUNT files and SWITCHYARD_FILE_BYTES_PER_ACCOUNT bytes per account",
    auth: "key",
    body: uploadFileForm,
    bodyType: "multipart/form-data",
    response: { description: "The file object." },
    errors: [400, 401, 413, 429],
  },
  {
    method: "get",
    path: "/files",
    id: "listFiles",
    summary: "The caller's account's files (uploads and batch output files)",
    auth: "key",
    query: listFilesQuery,
    response: { description: '`{object: "list", data: [file], first_id, last_id, has_more}`' },
    errors: [400, 401],
  },
  {
    method: "get",
    path: "/files/{id}",
    id: "retrieveFile",
    summary: "One file of the caller's account",
    auth: "key",
    pathParams: fileId,
    response: { description: "The file object." },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/files/{id}/content",
    id: "downloadFile",
    summary: "A file's bytes, checked against the SHA-256 taken when it was stored",
    auth: "key",
    pathParams: fileId,
    response: { description: "The file's bytes (JSONL).", contentType: "application/octet-stream" },
    errors: [401, 404],
  },
  {
    method: "delete",
    path: "/files/{id}",
    id: "deleteFile",
    summary: "Delete a file of the caller's account",
    auth: "key",
    pathParams: fileId,
    response: { description: '`{id, object: "file", deleted: true}`' },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/batches",
    id: "createBatch",
    summary:
      "Run an uploaded JSONL file of requests (endpoint /v1/chat/completions, /v1/completions, /v1/responses or /v1/embeddings; completion_window 24h) on spare capacity at the batch price. The file is validated at once: a bad one fails the batch with `errors` and an error file naming each line; past the account's enqueued-token cap it fails with token_limit_exceeded",
    auth: "key",
    body: createBatchSchema,
    response: { description: "The batch object (status in_progress, or failed)." },
    errors: [400, 401, 404, 429],
  },
  {
    method: "get",
    path: "/batches",
    id: "listBatches",
    summary: "The caller's account's batches, newest first",
    auth: "key",
    query: listBatchesQuery,
    response: { description: '`{object: "list", data: [batch], first_id, last_id, has_more}`' },
    errors: [400, 401],
  },
  {
    method: "get",
    path: "/batches/{id}",
    id: "retrieveBatch",
    summary: "One batch: status, request_counts, timestamps, output_file_id and error_file_id",
    auth: "key",
    pathParams: batchId,
    response: { description: "The batch object." },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/batches/{id}/cancel",
    id: "cancelBatch",
    summary: "Cancel a batch: lines running finish, the rest are answered batch_cancelled (unbilled); it ends cancelled",
    auth: "key",
    pathParams: batchId,
    response: { description: "The batch object, status cancelling." },
    errors: [401, 404, 409],
  },
  {
    method: "get",
    path: "/models",
    id: "listModels",
    summary: "The models the key may use",
    auth: "key",
    response: { description: '`{object: "list", data: [model]}` with context length, precision, tags, prices per tier and status.' },
    errors: [401],
  },
  {
    method: "get",
    path: "/models/{model}",
    id: "retrieveModel",
    summary: "One model (the id has a slash: `owner/name`)",
    auth: "key",
    pathParams: [{ name: "model", description: "`owner/name`" }],
    response: { description: "A model object." },
    errors: [401, 404],
  },
  {
    method: "delete",
    path: "/models/{model}",
    id: "deleteModel",
    summary: "Models cannot be deleted with a key (403); an unknown model is a 404",
    auth: "key",
    pathParams: [{ name: "model", description: "`owner/name`" }],
    response: { description: "Never succeeds." },
    errors: [401, 403, 404],
  },
];

const usageQuery = [
  { name: "start", description: "Inclusive; Unix seconds or an ISO 8601 date or date-time." },
  { name: "end", description: "Exclusive; Unix seconds or an ISO 8601 date or date-time." },
  { name: "group_by", description: "`model`, `day` or `key`.", schema: { type: "string", enum: ["model", "day", "key"] } },
];

const OTHER_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/v1/usage",
    id: "getUsage",
    summary: "The caller's account's usage and exact cost",
    auth: "key",
    query: usageQuery,
    response: { description: "Totals and groups." },
    errors: [400, 401],
  },
  {
    method: "get",
    path: "/v1/keys",
    id: "listAccountKeys",
    summary: "The caller's account's keys (needs the manage-keys right)",
    auth: "key",
    response: { description: "The keys (never their secrets)." },
    errors: [401, 403],
  },
  {
    method: "post",
    path: "/v1/keys",
    id: "createAccountKey",
    summary:
      "Create a key in the caller's account (needs the manage-keys right; shown once). It gets at most the caller's rights: omitted fields inherit the caller's models, limits, expiry and remaining budget; asking for more is a 403 exceeds_own_rights naming the field",
    auth: "key",
    body: accountCreateKeyBody,
    response: { description: "The key and its id." },
    errors: [400, 401, 403],
  },
  {
    method: "delete",
    path: "/v1/keys/{id}",
    id: "revokeAccountKey",
    summary:
      "Revoke a key of the caller's account (needs the manage-keys right; only a key whose rights are within the caller's, else 403 exceeds_own_rights)",
    auth: "key",
    pathParams: [{ name: "id", description: "Key id." }],
    response: { description: "The revoked key." },
    errors: [401, 403, 404],
  },
  {
    method: "post",
    path: "/v1/deployments",
    id: "createDeployment",
    summary:
      "Deploy a catalog model marked dedicated as a private endpoint of the caller's account (instances load in the background). Needs the manage-deployments right (403), a model the key may use (404), budget for a billed segment per instance (402), room in the account's caps (400 too_many_deployments / too_many_instances) and in memory (400 insufficient_memory)",
    auth: "key",
    body: createDeploymentBody,
    response: {
      description:
        "The deploy object: id, model, name, model_id (`<account>/<name>`, what requests name as `model`), status, fail_reason, instances {running, pending}, settings, created_at, updated_at.",
    },
    errors: [400, 401, 402, 403, 404],
  },
  {
    method: "get",
    path: "/v1/deployments",
    id: "listDeployments",
    summary: "The caller's account's deployments (deleted ones only with status=deleted)",
    auth: "key",
    query: listDeploymentsQuery,
    response: { description: '`{object: "list", data: [deployment]}`' },
    errors: [400, 401],
  },
  {
    method: "get",
    path: "/v1/deployments/{id}",
    id: "getDeployment",
    summary: "One deployment of the caller's account",
    auth: "key",
    pathParams: deploymentId,
    response: { description: "The deploy object." },
    errors: [401, 404],
  },
  {
    method: "patch",
    path: "/v1/deployments/{id}",
    id: "scaleDeployment",
    summary:
      "Change min_instances / max_instances (0 stops it and its billing). Needs the manage-deployments right; a scale-up is checked against budget, caps and memory like a create",
    auth: "key",
    body: scaleDeploymentBody,
    pathParams: deploymentId,
    response: { description: "The deploy object." },
    errors: [400, 401, 402, 403, 404],
  },
  {
    method: "delete",
    path: "/v1/deployments/{id}",
    id: "deleteDeployment",
    summary: "Drain its requests in flight, unload it, stop its billing (needs the manage-deployments right)",
    auth: "key",
    pathParams: deploymentId,
    response: { description: "The deploy object, status `deleted`." },
    errors: [401, 403, 404],
  },
  {
    method: "post",
    path: "/v1/adapters",
    id: "createAdapter",
    summary:
      "Upload a LoRA adapter of a chat model served on this server's engine, as a private model of the caller's account (`<account>/<name>`, billed at the base's prices). multipart/form-data: `base_model`, `name`, and `adapter_config` + `adapter_model` (PEFT) or `adapter_gguf`. Checked (a PEFT adapter converted) against the base, loaded, and kept across restarts. Needs the manage-deployments right (403) and a base the key may use (404); a wrong base or shapes is a 400 invalid_adapter with the reason, a name already taken a 409, more than SWITCHYARD_ADAPTERS_PER_ACCOUNT a 400 too_many_adapters, files over SWITCHYARD_ADAPTER_MAX_BYTES a 413",
    auth: "key",
    body: uploadAdapterForm,
    bodyType: "multipart/form-data",
    response: {
      description:
        "The adapter object: id, object `adapter`, model_id (what requests name as `model`), base_model, name, format (`peft` or `gguf`), bytes and sha256 (of the served GGUF LoRA), status (`ready`, or `failed` with fail_reason after a start that could not load it), created_at.",
    },
    errors: [400, 401, 402, 403, 404, 409, 413, 429, 503],
  },
  {
    method: "get",
    path: "/v1/adapters",
    id: "listAdapters",
    summary: "The caller's account's uploaded adapters, newest first",
    auth: "key",
    response: { description: '`{object: "list", data: [adapter]}`' },
    errors: [401],
  },
  {
    method: "get",
    path: "/v1/adapters/{id}",
    id: "getAdapter",
    summary: "One uploaded adapter of the caller's account",
    auth: "key",
    pathParams: adapterId,
    response: { description: "The adapter object." },
    errors: [401, 404],
  },
  {
    method: "delete",
    path: "/v1/adapters/{id}",
    id: "deleteAdapter",
    summary:
      "Delete an uploaded adapter: requests naming it get 404 from now, those running on it finish (and are billed), and its memory and file are freed after them (needs the manage-deployments right)",
    auth: "key",
    pathParams: adapterId,
    response: { description: '`{id, object: "adapter", deleted: true}`' },
    errors: [401, 403, 404],
  },
  {
    method: "get",
    path: "/console",
    id: "console",
    summary: "The web console (redirects to /console/)",
    auth: "none",
    response: { description: "A redirect.", contentType: "text/html" },
    errors: [],
  },
  {
    method: "get",
    path: "/console/{file}",
    id: "consoleFiles",
    summary: "The web console's page and assets",
    auth: "none",
    pathParams: [{ name: "file", description: "File path." }],
    response: { description: "The file.", contentType: "application/octet-stream" },
    errors: [404],
  },
  {
    method: "get",
    path: "/health",
    id: "health",
    summary: "Readiness and load per model",
    auth: "none",
    response: {
      description:
        '200 once every model is loaded; 503 while loading, if one failed, or while the server drains before stopping (`status: "draining"`).',
    },
    errors: [503],
  },
  {
    method: "get",
    path: "/metrics",
    id: "metrics",
    summary: "Prometheus metrics (vLLM names)",
    auth: "none",
    response: { description: "Prometheus text.", contentType: "text/plain" },
    errors: [],
  },
  {
    method: "get",
    path: "/openapi.json",
    id: "openapi",
    summary: "This document",
    auth: "none",
    response: { description: "OpenAPI 3.1." },
    errors: [],
  },
  {
    method: "get",
    path: "/docs",
    id: "docs",
    summary: "The rendered API reference",
    auth: "none",
    response: { description: "HTML.", contentType: "text/html" },
    errors: [],
  },
  {
    method: "get",
    path: "/docs/start.js",
    id: "docsStart",
    summary: "The reference page's start script (a file: the page's CSP allows no inline script)",
    auth: "none",
    response: { description: "JavaScript.", contentType: "text/javascript" },
    errors: [],
  },
  {
    method: "get",
    path: "/docs/assets/{file}",
    id: "docsAssets",
    summary: "The reference page's scripts and styles (from swagger-ui-dist)",
    auth: "none",
    pathParams: [{ name: "file", description: "File name." }],
    response: { description: "The file.", contentType: "application/octet-stream" },
    errors: [404],
  },
  {
    method: "post",
    path: "/admin/v1/keys",
    id: "adminCreateKey",
    summary: "Create an API key (the key is shown once)",
    auth: "admin",
    body: createKeyBody,
    response: { description: "The key and its id." },
    errors: [400, 401, 429],
  },
  {
    method: "get",
    path: "/admin/v1/keys",
    id: "adminListKeys",
    summary: "List keys",
    auth: "admin",
    query: listKeysQuery,
    response: { description: "The keys (never their secrets)." },
    errors: [401, 429],
  },
  {
    method: "patch",
    path: "/admin/v1/keys/{id}",
    id: "adminPatchKey",
    summary: "Change a key's limits and budget",
    auth: "admin",
    body: patchKeyBody,
    pathParams: [{ name: "id", description: "Key id." }],
    response: { description: "The key." },
    errors: [400, 401, 404, 429],
  },
  {
    method: "delete",
    path: "/admin/v1/keys/{id}",
    id: "adminRevokeKey",
    summary: "Revoke a key",
    auth: "admin",
    pathParams: [{ name: "id", description: "Key id." }],
    response: { description: "The revoked key." },
    errors: [401, 404, 429],
  },
  {
    method: "get",
    path: "/admin/v1/usage",
    id: "adminUsage",
    summary: "An account's usage",
    auth: "admin",
    query: [{ name: "account", description: "Account name (required)." }, ...usageQuery],
    response: { description: "Totals and groups." },
    errors: [400, 401, 404, 429],
  },
  {
    method: "post",
    path: "/admin/v1/accounts/{name}/disable",
    id: "adminDisableAccount",
    summary: "Disable an account: its keys stop working and its deployments' instances stop (billed up to now)",
    auth: "admin",
    pathParams: [{ name: "name", description: "Account name." }],
    response: { description: "The account." },
    errors: [401, 404, 429],
  },
  {
    method: "post",
    path: "/admin/v1/accounts/{name}/enable",
    id: "adminEnableAccount",
    summary: "Enable an account",
    auth: "admin",
    pathParams: [{ name: "name", description: "Account name." }],
    response: { description: "The account." },
    errors: [401, 404, 429],
  },
];

/** A zod schema as the JSON Schema (2020-12, as OpenAPI 3.1 uses) of what a client may send. */
function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  return rest;
}

const RATE_LIMIT_HEADERS = Object.fromEntries(RATE_LIMIT_HEADER_NAMES.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

const HEADER_TEXT: Record<string, string> = {
  limit: "The key's per-minute limit",
  remaining: "What is left of it after this request",
  reset: "How long until everything taken in the window has aged out (a duration: `850ms`, `6s`, `1m0s`)",
};

const SECURITY: Record<Auth, Array<Record<string, string[]>>> = {
  key: [{ bearerKey: [] }, { apiKeyHeader: [] }, { xApiKeyHeader: [] }],
  admin: [{ adminBearer: [] }],
  none: [],
};

function queryParameters(query: Operation["query"]) {
  if (!query) return [];
  if (Array.isArray(query))
    return query.map((p) => ({
      name: p.name,
      in: "query",
      required: false,
      description: p.description,
      schema: p.schema ?? { type: "string" },
    }));
  const schema = jsonSchema(query) as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(schema.properties ?? {}).map(([name, property]) => ({
    name,
    in: "query",
    required: schema.required?.includes(name) ?? false,
    schema: property,
  }));
}

function operationObject(op: Operation, operationId: string) {
  const ok = op.response.streams
    ? { "application/json": { schema: { type: "object" } }, "text/event-stream": { schema: { type: "string" } } }
    : { [op.response.contentType ?? "application/json"]: { schema: op.response.contentType ? { type: "string" } : { type: "object" } } };
  const errors = Object.fromEntries(op.errors.map((status) => [String(status), { $ref: "#/components/responses/Error" }]));
  const parameters = [
    ...(op.pathParams ?? []).map((p) => ({
      name: p.name,
      in: "path",
      required: true,
      description: p.description,
      schema: { type: "string" },
    })),
    ...queryParameters(op.query),
  ];
  return {
    operationId,
    summary: op.summary,
    security: SECURITY[op.auth],
    ...(parameters.length ? { parameters } : {}),
    ...(op.body
      ? { requestBody: { required: true, content: { [op.bodyType ?? "application/json"]: { schema: jsonSchema(op.body) } } } }
      : {}),
    // Every response to a key with a per-minute limit carries the rate-limit headers.
    responses: {
      "200": { description: op.response.description, content: ok, ...(op.auth === "key" ? { headers: RATE_LIMIT_HEADERS } : {}) },
      ...errors,
    },
  };
}

/**
 * The OpenAPI 3.1 document. Request bodies come from the zod schemas the routes validate with, so
 * the document cannot drift from what is accepted. The API operations appear under every prefix.
 */
export function openApiDocument(version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const add = (path: string, method: Method, operation: unknown) => ((paths[path] ??= {})[method] = operation);
  for (const op of API_OPERATIONS) {
    for (const prefix of API_PREFIXES) {
      const suffix = prefix === "/v1/compat" ? "" : prefix === "/v1/openai" ? "_openai" : "_v1";
      add(prefix + op.path, op.method, operationObject(op, op.id + suffix));
    }
  }
  for (const op of OTHER_OPERATIONS) add(op.path, op.method, operationObject(op, op.id));
  // The token endpoints are served at the root too, where vLLM and llama-server serve them.
  for (const op of API_OPERATIONS.filter((o) => o.path === "/tokenize" || o.path === "/detokenize"))
    add(op.path, op.method, operationObject(op, `${op.id}_root`));
  return {
    openapi: "3.1.0",
    info: {
      title: "Switchyard",
      version,
      description: "OpenAI-compatible chat completions, completions and responses on embedded llama.cpp models.",
    },
    paths,
    components: {
      securitySchemes: {
        bearerKey: { type: "http", scheme: "bearer", description: "An API key: `Authorization: Bearer KEY`." },
        apiKeyHeader: { type: "apiKey", in: "header", name: "api-key", description: "The same key, Azure-style." },
        xApiKeyHeader: { type: "apiKey", in: "header", name: "x-api-key", description: "The same key." },
        adminBearer: {
          type: "http",
          scheme: "bearer",
          description:
            "The admin key (SWITCHYARD_ADMIN_KEY, at least 32 characters, or server.json). Failed attempts are throttled per client IP: 429 admin_auth_throttled with Retry-After.",
        },
      },
      schemas: { Error: jsonSchema(errorSchema) },
      headers: Object.fromEntries(
        RATE_LIMIT_HEADER_NAMES.map((name) => {
          const [, part, kind] = /^x-ratelimit-(\w+)-(\w+)$/.exec(name)!;
          return [
            name,
            {
              description: `${HEADER_TEXT[part!]} (${kind}); sent only for a key with a ${kind}-per-minute limit, on errors and streams too.`,
              schema: { type: "string" },
            },
          ];
        }),
      ),
      responses: {
        Error: {
          description: "An error in the OpenAI shape. Every response carries `x-request-id`.",
          content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        },
      },
    },
  };
}
