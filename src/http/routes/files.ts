import type { FastifyInstance, FastifyRequest } from "fastify";
import type { BatchLimits } from "../../batches/limits.js";
import type { BatchService } from "../../batches/service.js";
import { listPage, toWireFile } from "../../batches/wire.js";
import { InvalidRequest, NotFound } from "../../errors.js";
import { listFilesQuery } from "../../protocol/batches-request.js";
import type { FileStore } from "../../storage/files.js";
import { callerOf } from "../auth.js";
import { parseRequest } from "../chat-input.js";
import { UploadGate } from "../upload-gate.js";

const notFound = (id: string) => new NotFound(`No file with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/** The Files API, scoped to the caller's account: upload (multipart), list, get, content, delete. */
export function fileRoutes(app: FastifyInstance, batches: BatchService, files: FileStore, limits: BatchLimits): void {
  const gate = new UploadGate(limits);
  void app.register(async (uploads) => {
    // Only this route reads multipart bodies, whole, up to the file limit and room for the form around it.
    uploads.addContentTypeParser("multipart/form-data", { parseAs: "buffer", bodyLimit: limits.maxFileBytes + FORM_OVERHEAD_BYTES }, (_request, body, done) => done(null, body));
    // The slot is taken before the body is read and freed when the exchange ends, answered or cut off.
    uploads.addHook("preParsing", async (request, reply) => {
      const release = gate.take(callerOf(request).accountId);
      reply.raw.once("close", release);
    });
    uploads.post("/files", async (request, reply) => {
      const caller = callerOf(request);
      const { purpose, filename, content } = await readUpload(request);
      const stored = await batches.uploadFile(caller, { purpose, filename, content });
      return reply.send(toWireFile(stored));
    });
  });

  app.get("/files", async (request) => {
    const query = parseRequest(listFilesQuery, request.query ?? {});
    const page = await files.list(callerOf(request).accountId, { ...query, limit: query.limit + 1 });
    return listPage(page.slice(0, query.limit).map(toWireFile), page.length > query.limit);
  });

  app.get<{ Params: { id: string } }>("/files/:id", async (request) => {
    const file = await files.get(callerOf(request).accountId, request.params.id);
    if (!file) throw notFound(request.params.id);
    return toWireFile(file);
  });

  app.get<{ Params: { id: string } }>("/files/:id/content", async (request, reply) => {
    const content = await files.content(callerOf(request).accountId, request.params.id);
    if (!content) throw notFound(request.params.id);
    return reply.type("application/octet-stream").send(content);
  });

  app.delete<{ Params: { id: string } }>("/files/:id", async (request) => {
    if (!(await files.delete(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    return { id: request.params.id, object: "file", deleted: true };
  });
}

/** What a multipart form may add around the file: boundaries, part headers, the purpose field. */
const FORM_OVERHEAD_BYTES = 64 * 1024;

/** Reads the form with the platform's own multipart parser (the Fetch API's FormData). */
async function readUpload(request: FastifyRequest): Promise<{ purpose: string; filename: string; content: Buffer }> {
  const contentType = request.headers["content-type"];
  if (!Buffer.isBuffer(request.body) || !contentType) throw new InvalidRequest("Upload the file as multipart/form-data with the fields 'file' and 'purpose'.", "file", "invalid_content_type");
  let form: FormData;
  try {
    form = await new Response(request.body as unknown as BodyInit, { headers: { "content-type": contentType } }).formData();
  } catch {
    throw new InvalidRequest("The multipart/form-data body could not be read.", "file", "invalid_multipart");
  }
  const file = form.get("file");
  const purpose = form.get("purpose");
  if (!(file instanceof Blob)) throw new InvalidRequest("Missing required parameter: 'file'.", "file", "missing_required_parameter");
  if (typeof purpose !== "string") throw new InvalidRequest("Missing required parameter: 'purpose'.", "purpose", "missing_required_parameter");
  const filename = (file instanceof File ? file.name : "").slice(0, 256) || "upload.jsonl";
  return { purpose, filename, content: Buffer.from(await file.arrayBuffer()) };
}
