import { Readable } from "node:stream";
import type { FastifyInstance } from "fastify";
import type { BatchLimits } from "../../batches/limits.js";
import type { BatchService } from "../../batches/service.js";
import { listPage, toWireFile } from "../../batches/wire.js";
import { NotFound } from "../../errors.js";
import { listFilesQuery } from "../../protocol/batches-request.js";
import { unknownCursor } from "../../protocol/list-page.js";
import type { FileStore } from "../../storage/files.js";
import { callerOf } from "../auth.js";
import { parseRequest } from "../../protocol/parse-request.js";
import { answerUpload, formParts, requireMultipart, uploadScope } from "../form-upload.js";
import { UploadGate } from "../upload-gate.js";

const notFound = (id: string) => new NotFound(`No file with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/** The Files API, scoped to the caller's account: upload (multipart), list, get, content, delete. */
export function fileRoutes(app: FastifyInstance, batches: BatchService, files: FileStore, limits: BatchLimits): void {
  // One file, one byte over its limit: the service sees the limit passed and answers 413.
  const multipartLimits = { fileSize: limits.maxFileBytes + 1, files: 1, fields: 8, fieldSize: 1024, parts: 10, headerPairs: 64 };
  uploadScope(app, new UploadGate(limits), multipartLimits, (uploads) => {
    uploads.post("/files", async (request, reply) => {
      requireMultipart(request, "Upload the file as multipart/form-data with the fields 'file' and 'purpose'.", "file");
      // Refused partway (the quota, the file's limit) or before any of it was read (rate limit, budget): form-upload.ts.
      return answerUpload(request, reply, async () =>
        toWireFile(await batches.uploadFile(callerOf(request), formParts(request, ["file"], "file"))),
      );
    });
  });

  app.get("/files", async (request) => {
    const query = parseRequest(listFilesQuery, request.query ?? {});
    if (query.after !== undefined && !(await files.get(callerOf(request).accountId, query.after))) throw unknownCursor("file", query.after);
    const page = await files.list(callerOf(request).accountId, { ...query, limit: query.limit + 1 });
    return listPage(page.slice(0, query.limit).map(toWireFile), page.length > query.limit);
  });

  app.get<{ Params: { id: string } }>("/files/:id", async (request) => {
    const file = await files.get(callerOf(request).accountId, request.params.id);
    if (!file) throw notFound(request.params.id);
    return toWireFile(file);
  });

  // Streamed out of storage a few chunks at a time, uncompressed (no CPU spent on it beside the
  // engine); a chunk that fails its checksum cuts the response short.
  app.get<{ Params: { id: string } }>("/files/:id/content", { compress: false }, async (request, reply) => {
    const found = await files.read(callerOf(request).accountId, request.params.id);
    if (!found) throw notFound(request.params.id);
    reply.type("application/octet-stream").header("content-length", found.file.bytes);
    return reply.send(Readable.from(found.chunks));
  });

  app.delete<{ Params: { id: string } }>("/files/:id", async (request) => {
    if (!(await files.delete(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    return { id: request.params.id, object: "file", deleted: true };
  });
}
