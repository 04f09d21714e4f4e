import type { FastifyInstance } from "fastify";
import type { BatchService } from "../../batches/service.js";
import { toWireBatch } from "../../batches/wire.js";
import { NotFound } from "../../errors.js";
import { createBatchSchema, listBatchesQuery } from "../../protocol/batches-request.js";
import { toListPage, unknownCursor } from "../../protocol/list-page.js";
import { callerOf } from "../auth.js";
import { parseRequest } from "../../protocol/parse-request.js";
import { route, type RouteSpec } from "../route-spec.js";

const batchId = [{ name: "id", description: "The batch's id (`batch_…`)." }];

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const batchOperations = {
  create: {
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
  list: {
    method: "get",
    path: "/batches",
    id: "listBatches",
    summary: "The caller's account's batches, newest first",
    auth: "key",
    query: listBatchesQuery,
    response: { description: '`{object: "list", data: [batch], first_id, last_id, has_more}`' },
    errors: [400, 401],
  },
  retrieve: {
    method: "get",
    path: "/batches/{id}",
    id: "retrieveBatch",
    summary: "One batch: status, request_counts, timestamps, output_file_id and error_file_id",
    auth: "key",
    pathParams: batchId,
    response: { description: "The batch object." },
    errors: [401, 404],
  },
  cancel: {
    method: "post",
    path: "/batches/{id}/cancel",
    id: "cancelBatch",
    summary: "Cancel a batch: lines running finish, the rest are answered batch_cancelled (unbilled); it ends cancelled",
    auth: "key",
    pathParams: batchId,
    response: { description: "The batch object, status cancelling." },
    errors: [401, 404, 409],
  },
} satisfies Record<string, RouteSpec>;

/** The Batch API, scoped to the caller's account: create, get, list (newest first), cancel. */
export function batchRoutes(app: FastifyInstance, batches: BatchService): void {
  route(app, batchOperations.create, async (request) => {
    const body = parseRequest(createBatchSchema, request.body);
    const batch = await batches.create(callerOf(request), {
      inputFileId: body.input_file_id,
      endpoint: body.endpoint,
      completionWindow: body.completion_window,
      metadata: body.metadata ?? null,
    });
    return toWireBatch(batch);
  });

  route(app, batchOperations.list, async (request) => {
    const query = parseRequest(listBatchesQuery, request.query ?? {});
    if (query.after !== undefined) {
      await batches.get(callerOf(request), query.after).catch((error: unknown) => {
        throw error instanceof NotFound ? unknownCursor("batch", query.after!) : error;
      });
    }
    const page = await batches.list(callerOf(request), query.limit + 1, query.after);
    return toListPage(page, query.limit, toWireBatch);
  });

  route<{ Params: { id: string } }>(app, batchOperations.retrieve, async (request) =>
    toWireBatch(await batches.get(callerOf(request), request.params.id)),
  );

  route<{ Params: { id: string } }>(app, batchOperations.cancel, async (request) =>
    toWireBatch(await batches.cancel(callerOf(request), request.params.id)),
  );
}
