import { CapacityUnavailable, InvalidRequest, ModelNotFound, ServiceError } from "../errors.js";
import { visibleTo, type ModelRegistry, type ServedModel } from "./model-registry.js";

/**
 * Which API serves a model: a sentence-embedding model (catalog tag `Embedding`) only the embeddings
 * API; `any`: an API every model takes (the token endpoints).
 */
export type ModelApi = "chat" | "embeddings" | "any";

export const servesEmbeddings = (model: ServedModel) => model.entry.tags.includes("Embedding");

/** Whether a key limited to some models may use this one: the key may list it by its id or by an alias. */
export function allowedFor(allowedModels: readonly string[] | null, model: ServedModel): boolean {
  return allowedModels === null || [model.entry.id, ...(model.entry.aliases ?? [])].some((name) => allowedModels.includes(name));
}

/**
 * The model a request names (by id or alias), once it can take the request: visible to the caller
 * and allowed by its key (else 404, as for a model that does not exist), served by this API (else
 * 400), and loaded.
 */
export function requireServedModel(
  registry: ModelRegistry,
  caller: { accountId: string; allowedModels: string[] | null },
  id: string,
  api: ModelApi,
): ServedModel {
  const served = registry.get(id);
  // Another account's deployment is refused exactly like a model that does not exist.
  if (!served || !visibleTo(served, caller.accountId) || !allowedFor(caller.allowedModels, served)) throw new ModelNotFound(id);
  if (api === "chat" && servesEmbeddings(served)) {
    throw new InvalidRequest(
      `The model '${id}' is an embedding model: call POST /v1/embeddings with it, not this API.`,
      "model",
      "model_not_supported",
    );
  }
  if (api === "embeddings" && !servesEmbeddings(served)) {
    throw new InvalidRequest(
      `The model '${id}' is not an embedding model: call it through chat completions, or use a model tagged 'Embedding' (GET /v1/models).`,
      "model",
      "model_not_supported",
    );
  }
  if (served.state === "stopped")
    throw new ServiceError(
      503,
      "server_error",
      `The deployment '${id}' is scaled to zero instances; scale it up (PATCH /v1/deployments/{id} with min_instances ≥ 1) to call it.`,
      "deployment_stopped",
    );
  if (served.state === "elsewhere")
    throw new CapacityUnavailable(
      `The deployment '${id}' runs on another server process sharing this database and could not be forwarded there; retry shortly.`,
      5,
    );
  if (served.state === "not_pulled") {
    const how = `Pull it with 'switchyard models pull ${id}' (or 'npx switchyard models pull ${id}'), then restart the server.`;
    throw new ServiceError(
      503,
      "server_error",
      `The model '${id}' is in the catalog but not pulled on this server. ${how}`,
      "model_not_pulled",
    );
  }
  if (served.state === "failed") throw new CapacityUnavailable(`The model '${id}' failed to load: ${served.error ?? "unknown error"}`, 60);
  if (served.state !== "ready") throw new CapacityUnavailable(`The model '${id}' is still loading; retry shortly.`, 5);
  return served;
}
