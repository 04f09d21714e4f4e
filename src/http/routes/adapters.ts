import type { FastifyInstance } from "fastify";
import { ADAPTER_FILE_FIELDS, type Adapter, type AdapterLimits, type AdapterService } from "../../adapters/types.js";
import { NotFound } from "../../errors.js";
import { callerOf, managerOf } from "../auth.js";
import { answerUpload, formParts, requireMultipart, uploadScope } from "../form-upload.js";
import { UploadGate } from "../upload-gate.js";
import { uploadAdapterForm } from "../../protocol/adapters-request.js";
import { route, type RouteSpec } from "../route-spec.js";

const adapterId = [{ name: "id", description: "The adapter's id (`adp_…`)." }];

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const adapterOperations = {
  create: {
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
  list: {
    method: "get",
    path: "/v1/adapters",
    id: "listAdapters",
    summary: "The caller's account's uploaded adapters, newest first",
    auth: "key",
    response: { description: '`{object: "list", data: [adapter]}`' },
    errors: [401],
  },
  get: {
    method: "get",
    path: "/v1/adapters/{id}",
    id: "getAdapter",
    summary: "One uploaded adapter of the caller's account",
    auth: "key",
    pathParams: adapterId,
    response: { description: "The adapter object." },
    errors: [401, 404],
  },
  delete: {
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
} satisfies Record<string, RouteSpec>;

/** The adapter object. */
export function toWireAdapter(a: Adapter) {
  return {
    id: a.id,
    object: "adapter" as const,
    model_id: a.modelId,
    base_model: a.baseModel,
    name: a.name,
    format: a.format,
    bytes: a.bytes,
    sha256: a.sha256,
    status: a.status,
    fail_reason: a.failReason,
    created_at: Math.floor(a.createdAt.getTime() / 1000),
  };
}

/**
 * LoRA adapters uploaded by the calling key's own account. Another account's adapter id is the same
 * 404 as an id that does not exist. Uploading and deleting need a key with the manage-deployments
 * right (an adapter takes the server's memory); listing and reading do not: any key of the account
 * already sees its adapters' model ids in /v1/models.
 */
export function adapterRoutes(app: FastifyInstance, adapters: AdapterService, limits: AdapterLimits): void {
  const missing = (id: string) => new NotFound(`No adapter with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}'.`);
  // Up to three files (the PEFT pair or a GGUF LoRA), each one byte over the limit: the service sees the limit passed and answers 413.
  const multipartLimits = { fileSize: limits.maxBytes + 1, files: 3, fields: 4, fieldSize: 1024, parts: 8, headerPairs: 64 };
  uploadScope(app, new UploadGate(limits), multipartLimits, (uploads) => {
    route(uploads, adapterOperations.create, async (request, reply) => {
      const caller = managerOf(request, "adapters");
      requireMultipart(
        request,
        "Upload the adapter as multipart/form-data: the fields 'base_model' and 'name', and the files 'adapter_config' and 'adapter_model' (PEFT) or 'adapter_gguf'.",
        null,
      );
      const parts = formParts(request, ADAPTER_FILE_FIELDS, "adapter_model");
      return answerUpload(request, reply, async () => toWireAdapter(await adapters.upload(caller, parts)));
    });
  });

  route(app, adapterOperations.list, async (request) => {
    const list = await adapters.list(callerOf(request));
    return { object: "list", data: list.map(toWireAdapter) };
  });

  route<{ Params: { id: string } }>(app, adapterOperations.get, async (request) => {
    const found = await adapters.get(callerOf(request), request.params.id);
    if (!found) throw missing(request.params.id);
    return toWireAdapter(found);
  });

  route<{ Params: { id: string } }>(app, adapterOperations.delete, async (request) => {
    const removed = await adapters.remove(managerOf(request, "adapters"), request.params.id);
    if (!removed) throw missing(request.params.id);
    return { id: removed.id, object: "adapter" as const, deleted: true };
  });
}
