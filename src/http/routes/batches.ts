import type { FastifyInstance } from "fastify";
import type { BatchService } from "../../batches/service.js";
import { listPage, toWireBatch } from "../../batches/wire.js";
import { NotFound } from "../../errors.js";
import { createBatchSchema, listBatchesQuery } from "../../protocol/batches-request.js";
import { unknownCursor } from "../../protocol/list-page.js";
import { callerOf } from "../auth.js";
import { parseRequest } from "../../protocol/parse-request.js";

/** The Batch API, scoped to the caller's account: create, get, list (newest first), cancel. */
export function batchRoutes(app: FastifyInstance, batches: BatchService): void {
  app.post("/batches", async (request) => {
    const body = parseRequest(createBatchSchema, request.body);
    const batch = await batches.create(callerOf(request), {
      inputFileId: body.input_file_id,
      endpoint: body.endpoint,
      completionWindow: body.completion_window,
      metadata: body.metadata ?? null,
    });
    return toWireBatch(batch);
  });

  app.get("/batches", async (request) => {
    const query = parseRequest(listBatchesQuery, request.query ?? {});
    if (query.after !== undefined) {
      await batches.get(callerOf(request), query.after).catch((error: unknown) => {
        throw error instanceof NotFound ? unknownCursor("batch", query.after!) : error;
      });
    }
    const page = await batches.list(callerOf(request), query.limit + 1, query.after);
    return listPage(page.slice(0, query.limit).map(toWireBatch), page.length > query.limit);
  });

  app.get<{ Params: { id: string } }>("/batches/:id", async (request) =>
    toWireBatch(await batches.get(callerOf(request), request.params.id)),
  );

  app.post<{ Params: { id: string } }>("/batches/:id/cancel", async (request) =>
    toWireBatch(await batches.cancel(callerOf(request), request.params.id)),
  );
}
