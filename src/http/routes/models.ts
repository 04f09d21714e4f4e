import type { FastifyInstance } from "fastify";
import { stringifyJson } from "../../protocol/money-json.js";
import { Forbidden, ModelNotFound } from "../../errors.js";
import type { ModelRegistry } from "../../serving/model-registry.js";
import { isNamed, modelsVisibleTo, toWireModel } from "../../serving/model-view.js";
import { callerOf } from "../auth.js";
import { route, type RouteSpec } from "../route-spec.js";

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const modelOperations = {
  list: {
    method: "get",
    path: "/models",
    id: "listModels",
    summary: "The models the key may use",
    auth: "key",
    response: { description: '`{object: "list", data: [model]}` with context length, precision, tags, prices per tier and status.' },
    errors: [401],
  },
  retrieve: {
    method: "get",
    path: "/models/{model}",
    route: "/models/*",
    id: "retrieveModel",
    summary: "One model (the id has a slash: `owner/name`)",
    auth: "key",
    pathParams: [{ name: "model", description: "`owner/name`" }],
    response: { description: "A model object." },
    errors: [401, 404],
  },
  delete: {
    method: "delete",
    path: "/models/{model}",
    route: "/models/*",
    id: "deleteModel",
    summary: "Models cannot be deleted with a key (403); an unknown model is a 404",
    auth: "key",
    pathParams: [{ name: "model", description: "`owner/name`" }],
    response: { description: "Never succeeds." },
    errors: [401, 403, 404],
  },
} satisfies Record<string, RouteSpec>;

/** The models the calling key may use: public ones and its own account's deployments and adapters. */
export function modelRoutes(app: FastifyInstance, registry: ModelRegistry): void {
  const visible = (caller: { allowedModels: string[] | null; accountId: string }) => modelsVisibleTo(registry, caller);

  route(app, modelOperations.list, async (request, reply) => {
    const data = visible(callerOf(request)).map(toWireModel);
    return reply.type("application/json; charset=utf-8").send(stringifyJson({ object: "list", data }));
  });

  // Model ids contain a slash (`owner/name`), so the id is the rest of the path. The router has
  // already decoded it: decoding again turned `%25` into a stray `%` (a 500 for `a%25b`).
  route(app, modelOperations.retrieve, async (request, reply) => {
    const id = (request.params as { "*": string })["*"];
    const model = visible(callerOf(request)).find((m) => isNamed(m, id));
    if (!model) throw new ModelNotFound(id);
    return reply.type("application/json; charset=utf-8").send(stringifyJson(toWireModel(model)));
  });

  // The SDK's models.delete: OpenAI deletes fine-tuned models; here no model can be deleted by a key.
  route(app, modelOperations.delete, async (request) => {
    const id = (request.params as { "*": string })["*"];
    const model = visible(callerOf(request)).find((m) => isNamed(m, id));
    if (!model) throw new ModelNotFound(id);
    const how = model.dedicated
      ? "Delete its deployment (DELETE /v1/deployments/{id}) instead."
      : model.upload
        ? `Delete the adapter (DELETE /v1/adapters/${model.upload.adapterId}) instead.`
        : "Catalog models are managed by the operator.";
    throw new Forbidden(`The model '${id}' cannot be deleted through the API. ${how}`, "model_not_deletable");
  });
}
