import type { FastifyInstance } from "fastify";
import { stringifyJson } from "../../protocol/money-json.js";
import { pricingView } from "../../billing/pricing-view.js";
import { Forbidden, ModelNotFound } from "../../errors.js";
import { visibleTo, type ModelRegistry, type ServedModel } from "../../serving/model-registry.js";
import { allowedFor } from "../../serving/served-model.js";
import { callerOf } from "../auth.js";

/** A model by its id or one of its aliases; each is listed once, under its id. */
const named = (model: ServedModel, name: string) => model.entry.id === name || (model.entry.aliases ?? []).includes(name);

function toWireModel({ entry, state, dedicated, upload }: ServedModel) {
  return {
    id: entry.id,
    object: "model" as const,
    created: entry.created,
    owned_by: entry.id.split("/")[0]!,
    metadata: {
      context_length: entry.context_length,
      precision: entry.precision,
      tags: entry.tags,
      aliases: entry.aliases ?? [],
      pricing: pricingView(entry.pricing),
      dedicated_endpoint: entry.dedicated === true,
      status: state,
      // A LoRA adapter: the catalog model it runs on.
      ...(entry.adapter_of !== undefined ? { adapter_of: entry.adapter_of } : {}),
      // The caller's own deployment: which one, and the catalog model it runs.
      ...(dedicated ? { deployment: { id: dedicated.deploymentId, model: dedicated.baseModel } } : {}),
      // The caller's own uploaded adapter: its id under /v1/adapters.
      ...(upload ? { adapter: { id: upload.adapterId } } : {}),
    },
  };
}

export function modelRoutes(app: FastifyInstance, registry: ModelRegistry): void {
  // Public models and the caller's own deployments and adapters; another account's are never listed.
  const visible = ({ allowedModels: allowed, accountId }: { allowedModels: string[] | null; accountId: string }) =>
    registry.list().filter((m) => visibleTo(m, accountId) && allowedFor(allowed, m));

  app.get("/models", async (request, reply) => {
    const data = visible(callerOf(request)).map(toWireModel);
    return reply.type("application/json; charset=utf-8").send(stringifyJson({ object: "list", data }));
  });

  // Model ids contain a slash (`owner/name`), so the id is the rest of the path. The router has
  // already decoded it: decoding again turned `%25` into a stray `%` (a 500 for `a%25b`).
  app.get("/models/*", async (request, reply) => {
    const id = (request.params as { "*": string })["*"];
    const model = visible(callerOf(request)).find((m) => named(m, id));
    if (!model) throw new ModelNotFound(id);
    return reply.type("application/json; charset=utf-8").send(stringifyJson(toWireModel(model)));
  });

  // The SDK's models.delete: OpenAI deletes fine-tuned models; here no model can be deleted by a key.
  app.delete("/models/*", async (request) => {
    const id = (request.params as { "*": string })["*"];
    const model = visible(callerOf(request)).find((m) => named(m, id));
    if (!model) throw new ModelNotFound(id);
    const how = model.dedicated
      ? "Delete its deployment (DELETE /v1/deployments/{id}) instead."
      : model.upload
        ? `Delete the adapter (DELETE /v1/adapters/${model.upload.adapterId}) instead.`
        : "Catalog models are managed by the operator.";
    throw new Forbidden(`The model '${id}' cannot be deleted through the API. ${how}`, "model_not_deletable");
  });
}
