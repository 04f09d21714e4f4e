/**
 * LoRA adapters uploaded by the calling key's own account. Another account's adapter id is the same
 * 404 as an id that does not exist. Uploading and deleting need a key with the manage-deployments
 * right (an adapter takes the server's memory); listing and reading do not: any key of the account
 * already sees its adapters' model ids in /v1/models.
 */
import { ADAPTER_FILE_FIELDS, type Adapter, type AdapterService } from "../../adapters/types.js";
import { NotFound } from "../../errors.js";
import { uploadAdapterForm } from "../../protocol/adapters-request.js";
import type { FormPart } from "../../protocol/form-parts.js";
import { listOf } from "../../protocol/list-page.js";
import { json, type Endpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";
import { mayManageDeployments } from "../manage-deployments.js";

const adapterId = [{ name: "id", description: "The adapter's id (`adp_…`)." }];

export const adapterSpecs = {
  create: {
    method: "post",
    path: "/v1/adapters",
    id: "createAdapter",
    summary:
      "Upload a LoRA adapter of a chat model served on this server's engine, as a private model of the caller's account (`<account>/<name>`, billed at the base's prices). multipart/form-data: `base_model`, `name`, and `adapter_config` + `adapter_model` (PEFT) or `adapter_gguf`. Checked (a PEFT adapter converted) against the base, loaded, and kept across restarts. Needs the manage-deployments right (403) and a base the key may use (404); a wrong base or shapes is a 400 invalid_adapter with the reason, a name already taken a 409, more than SWITCHYARD_ADAPTERS_PER_ACCOUNT a 400 too_many_adapters, files over SWITCHYARD_ADAPTER_MAX_BYTES a 413",
    auth: "key",
    body: uploadAdapterForm,
    bodyType: "multipart/form-data",
    form: {
      files: ADAPTER_FILE_FIELDS,
      param: "adapter_model",
      notMultipart: {
        message:
          "Upload the adapter as multipart/form-data: the fields 'base_model' and 'name', and the files 'adapter_config' and 'adapter_model' (PEFT) or 'adapter_gguf'.",
        param: null,
      },
    },
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
} satisfies Record<string, EndpointSpec>;

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

const missing = (id: string) => new NotFound(`No adapter with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}'.`);

type ById = EndpointInput<{ id: string }>;

export function adapterEndpoints(adapters: AdapterService): Endpoint[] {
  const authorize = mayManageDeployments("adapters");
  const create: Endpoint<EndpointInput<unknown, unknown, AsyncIterable<FormPart>>> = {
    ...adapterSpecs.create,
    authorize,
    run: async (caller, { body }) => json(toWireAdapter(await adapters.upload(caller, body))),
  };
  const list: Endpoint = {
    ...adapterSpecs.list,
    run: async (caller) => json(listOf((await adapters.list(caller)).map(toWireAdapter))),
  };
  const get: Endpoint<ById> = {
    ...adapterSpecs.get,
    async run(caller, { params }) {
      const found = await adapters.get(caller, params.id);
      if (!found) throw missing(params.id);
      return json(toWireAdapter(found));
    },
  };
  const remove: Endpoint<ById> = {
    ...adapterSpecs.delete,
    authorize,
    async run(caller, { params }) {
      const removed = await adapters.remove(caller, params.id);
      if (!removed) throw missing(params.id);
      return json({ id: removed.id, object: "adapter" as const, deleted: true });
    },
  };
  return [create, list, get, remove];
}
