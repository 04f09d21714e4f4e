/** The models the calling key may use: public ones and its own account's deployments and adapters. */
import { Forbidden, ModelNotFound } from "../../errors.js";
import { listOf } from "../../protocol/list-page.js";
import { stringifyJson } from "../../protocol/money-json.js";
import type { Principal } from "../../protocol/principal.js";
import type { ModelRegistry } from "../../serving/model-registry.js";
import { isNamed, modelsVisibleTo, toWireModel } from "../../serving/model-view.js";
import { jsonText, type Endpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";

const modelParam = [{ name: "model", description: "`owner/name`" }];

export const modelSpecs = {
  list: {
    method: "get",
    path: "/models",
    id: "listModels",
    summary: "The models the key may use",
    auth: "key",
    response: { description: '`{object: "list", data: [model]}` with context length, precision, tags, prices per tier and status.' },
    errors: [401],
  },
  // Model ids contain a slash (`owner/name`), so the id is the rest of the path. The router has
  // already decoded it: decoding again turned `%25` into a stray `%` (a 500 for `a%25b`).
  retrieve: {
    method: "get",
    path: "/models/{model}",
    route: "/models/*",
    id: "retrieveModel",
    summary: "One model (the id has a slash: `owner/name`)",
    auth: "key",
    pathParams: modelParam,
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
    pathParams: modelParam,
    response: { description: "Never succeeds." },
    errors: [401, 403, 404],
  },
} satisfies Record<string, EndpointSpec>;

type ModelInput = EndpointInput<{ model: string }>;

export function modelEndpoints(registry: ModelRegistry): Endpoint[] {
  const visible = (caller: Principal) => modelsVisibleTo(registry, caller);
  const find = (caller: Principal, id: string) => {
    const model = visible(caller).find((m) => isNamed(m, id));
    if (!model) throw new ModelNotFound(id);
    return model;
  };
  const list: Endpoint = {
    ...modelSpecs.list,
    run: async (caller) => jsonText(stringifyJson(listOf(visible(caller).map(toWireModel)))),
  };
  const retrieve: Endpoint<ModelInput> = {
    ...modelSpecs.retrieve,
    run: async (caller, { params }) => jsonText(stringifyJson(toWireModel(find(caller, params.model)))),
  };
  // The SDK's models.delete: OpenAI deletes fine-tuned models; here no model can be deleted by a key.
  const remove: Endpoint<ModelInput> = {
    ...modelSpecs.delete,
    async run(caller, { params }) {
      const model = find(caller, params.model);
      const how = model.dedicated
        ? "Delete its deployment (DELETE /v1/deployments/{id}) instead."
        : model.upload
          ? `Delete the adapter (DELETE /v1/adapters/${model.upload.adapterId}) instead.`
          : "Catalog models are managed by the operator.";
      throw new Forbidden(`The model '${params.model}' cannot be deleted through the API. ${how}`, "model_not_deletable");
    },
  };
  return [list, retrieve, remove];
}
