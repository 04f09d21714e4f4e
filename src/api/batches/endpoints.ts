/**
 * The Batch API, scoped to the caller's account: create (the input file validated at once), list
 * (newest first), retrieve, cancel. The batch service (batches/) does the work.
 */
import type { BatchService } from "../../batches/service.js";
import { toWireBatch } from "../../batches/wire.js";
import { NotFound } from "../../errors.js";
import { createBatchSchema, listBatchesQuery } from "../../protocol/batches-request.js";
import { toListPage, unknownCursor } from "../../protocol/list-page.js";
import { parseRequest } from "../../protocol/parse-request.js";
import { json, type Endpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";

const batchId = [{ name: "id", description: "The batch's id (`batch_…`)." }];

/** The URLs a batch line may run (the registry's batchable declarations, handed in): "a, b or c". */
function listed(urls: readonly string[]): string {
  return urls.length > 1 ? `${urls.slice(0, -1).join(", ")} or ${urls.at(-1)}` : (urls[0] ?? "none");
}

/** The declarations; `batchable`: the URLs a line may run, which createBatch's summary names (api/registry.ts hands them in). */
export const batchSpecs = (batchable: readonly string[]) =>
  ({
    create: {
      method: "post",
      path: "/batches",
      id: "createBatch",
      summary: `Run an uploaded JSONL file of requests (endpoint ${listed(batchable)}; completion_window 24h) on spare capacity at the batch price. The file is validated at once: a bad one fails the batch with \`errors\` and an error file naming each line; past the account's enqueued-token cap it fails with token_limit_exceeded`,
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
  }) satisfies Record<string, EndpointSpec>;

type ById = EndpointInput<{ id: string }>;
type CreateBody = ReturnType<typeof createBatchSchema.parse>;
type ListQuery = ReturnType<typeof listBatchesQuery.parse>;

export function batchEndpoints(batches: BatchService, batchable: readonly string[]): Endpoint[] {
  const specs = batchSpecs(batchable);
  const create: Endpoint<EndpointInput<unknown, unknown, CreateBody>> = {
    ...specs.create,
    async run(caller, { body }) {
      const batch = await batches.create(caller, {
        inputFileId: body.input_file_id,
        endpoint: body.endpoint,
        completionWindow: body.completion_window,
        metadata: body.metadata ?? null,
      });
      return json(toWireBatch(batch));
    },
  };
  const list: Endpoint<EndpointInput<unknown, ListQuery>> = {
    ...specs.list,
    parseQuery: (raw) => parseRequest(listBatchesQuery, raw),
    async run(caller, { query }) {
      if (query.after !== undefined) {
        await batches.get(caller, query.after).catch((error: unknown) => {
          throw error instanceof NotFound ? unknownCursor("batch", query.after!) : error;
        });
      }
      const page = await batches.list(caller, query.limit + 1, query.after);
      return json(toListPage(page, query.limit, toWireBatch));
    },
  };
  const retrieve: Endpoint<ById> = {
    ...specs.retrieve,
    run: async (caller, { params }) => json(toWireBatch(await batches.get(caller, params.id))),
  };
  const cancel: Endpoint<ById> = {
    ...specs.cancel,
    run: async (caller, { params }) => json(toWireBatch(await batches.cancel(caller, params.id))),
  };
  return [create, list, retrieve, cancel];
}
