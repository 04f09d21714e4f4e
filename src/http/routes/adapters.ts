import type { FastifyInstance } from "fastify";
import { ADAPTER_FILE_FIELDS, type Adapter, type AdapterLimits, type AdapterService } from "../../adapters/types.js";
import { NotFound } from "../../errors.js";
import { callerOf, managerOf } from "../auth.js";
import { answerUpload, formParts, requireMultipart, uploadScope } from "../form-upload.js";
import { UploadGate } from "../upload-gate.js";

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
    uploads.post("/v1/adapters", async (request, reply) => {
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

  app.get("/v1/adapters", async (request) => {
    const list = await adapters.list(callerOf(request));
    return { object: "list", data: list.map(toWireAdapter) };
  });

  app.get<{ Params: { id: string } }>("/v1/adapters/:id", async (request) => {
    const found = await adapters.get(callerOf(request), request.params.id);
    if (!found) throw missing(request.params.id);
    return toWireAdapter(found);
  });

  app.delete<{ Params: { id: string } }>("/v1/adapters/:id", async (request) => {
    const removed = await adapters.remove(managerOf(request, "adapters"), request.params.id);
    if (!removed) throw missing(request.params.id);
    return { id: removed.id, object: "adapter" as const, deleted: true };
  });
}
