import type { FastifyInstance } from "fastify";
import type { ResponseStore } from "../../api/responses/response-store.js";
import { InvalidRequest, NotFound } from "../../errors.js";
import { listPageQuery, pageOf, unknownCursor } from "../../protocol/list-page.js";
import { callerOf } from "../auth.js";
import { parse } from "./key-input.js";

const notFound = (id: string) => new NotFound(`No response with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/** Stored responses: retrieve, cancel (none can be), input items, delete; each only the caller's account's. */
export function storedResponseRoutes(app: FastifyInstance, store: ResponseStore): void {
  app.get<{ Params: { id: string }; Querystring: { stream?: unknown } }>("/responses/:id", async (request, reply) => {
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
  });

  // Only background responses can be cancelled, and none are: every response here runs in its request.
  app.post<{ Params: { id: string } }>("/responses/:id/cancel", async (request) => {
    if (!(await store.get(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    throw new InvalidRequest(
      "Only responses created with background=true can be cancelled; this server runs none in the background.",
      null,
      "not_cancellable",
    );
  });

  responseInputItemRoutes(app, store);

  app.delete<{ Params: { id: string } }>("/responses/:id", async (request) => {
    if (!(await store.delete(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    return { id: request.params.id, object: "response", deleted: true };
  });
}

/** `GET /responses/{id}/input_items`: paginated as OpenAI's (`after`, `limit`, `order`, default newest first). */
function responseInputItemRoutes(app: FastifyInstance, store: ResponseStore): void {
  app.get<{ Params: { id: string } }>("/responses/:id/input_items", async (request) => {
    const query = parse(listPageQuery("desc"), request.query ?? {});
    const stored = await store.get(callerOf(request).accountId, request.params.id);
    if (!stored) throw new NotFound(`No response with id '${request.params.id.slice(0, 64)}' found.`);
    const page = pageOf(stored.inputItems, query);
    if (!page) throw unknownCursor("input item in this response", query.after!);
    return page;
  });
}
