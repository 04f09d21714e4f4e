/**
 * The models a caller sees (`GET /v1/models`): public ones and its own account's deployments and
 * adapters, within its key's allowed models, each with its prices per tier.
 */
import { pricingView } from "../billing/pricing-view.js";
import type { WireModel } from "../protocol/models-response.js";
import { visibleTo, type ModelRegistry, type ServedModel } from "./model-registry.js";
import { allowedFor } from "./served-model.js";

export type { ServedModel } from "./model-registry.js";

/** Public models and the caller's own deployments and adapters; another account's are never listed. */
export function modelsVisibleTo(registry: ModelRegistry, caller: { allowedModels: string[] | null; accountId: string }): ServedModel[] {
  return registry.list().filter((m) => visibleTo(m, caller.accountId) && allowedFor(caller.allowedModels, m));
}

/** A model by its id or one of its aliases; each is listed once, under its id. */
export const isNamed = (model: ServedModel, name: string) => model.entry.id === name || (model.entry.aliases ?? []).includes(name);

/** The model object; serialise with stringifyJson so prices are exact numbers. */
export function toWireModel({ entry, state, dedicated, upload }: ServedModel): WireModel {
  return {
    id: entry.id,
    object: "model",
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
