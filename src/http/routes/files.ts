import { Readable } from "node:stream";
import type { FastifyInstance } from "fastify";
import type { BatchLimits } from "../../batches/limits.js";
import type { BatchService } from "../../batches/service.js";
import { toWireFile } from "../../batches/wire.js";
import { NotFound } from "../../errors.js";
import { listFilesQuery, uploadFileForm } from "../../protocol/batches-request.js";
import { toListPage, unknownCursor } from "../../protocol/list-page.js";
import { callerOf } from "../auth.js";
import { parseRequest } from "../../protocol/parse-request.js";
import { answerUpload, formParts, requireMultipart, uploadScope } from "../form-upload.js";
import { UploadGate } from "../upload-gate.js";
import { route, type RouteSpec } from "../route-spec.js";

const fileId = [{ name: "id", description: "The file's id (`file-…`)." }];

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const fileOperations = {
  create: {
    method: "post",
    path: "/files",
    id: "createFile",
    summary:
      "Upload a batch input file (multipart/form-data: `file`, `purpose: batch`). Limits: SWITCHYARD_FILE_MAX_BYTES per file (200 MB), SWITCHYARD_FILES_PER_ACCOUNT files and SWITCHYARD_FILE_BYTES_PER_ACCOUNT bytes per account",
    auth: "key",
    body: uploadFileForm,
    bodyType: "multipart/form-data",
    response: { description: "The file object." },
    errors: [400, 401, 413, 429],
  },
  list: {
    method: "get",
    path: "/files",
    id: "listFiles",
    summary: "The caller's account's files (uploads and batch output files)",
    auth: "key",
    query: listFilesQuery,
    response: { description: '`{object: "list", data: [file], first_id, last_id, has_more}`' },
    errors: [400, 401],
  },
  retrieve: {
    method: "get",
    path: "/files/{id}",
    id: "retrieveFile",
    summary: "One file of the caller's account",
    auth: "key",
    pathParams: fileId,
    response: { description: "The file object." },
    errors: [401, 404],
  },
  content: {
    method: "get",
    path: "/files/{id}/content",
    id: "downloadFile",
    summary: "A file's bytes, checked against the SHA-256 taken when it was stored",
    auth: "key",
    pathParams: fileId,
    response: { description: "The file's bytes (JSONL).", contentType: "application/octet-stream" },
    errors: [401, 404],
  },
  delete: {
    method: "delete",
    path: "/files/{id}",
    id: "deleteFile",
    summary: "Delete a file of the caller's account",
    auth: "key",
    pathParams: fileId,
    response: { description: '`{id, object: "file", deleted: true}`' },
    errors: [401, 404],
  },
} satisfies Record<string, RouteSpec>;

/** A file as the Files API shows it (batches/wire.ts). */
type FileRecord = Parameters<typeof toWireFile>[0];

/** What the Files API reads of the file store (storage/files.ts is one), every call scoped to an account. */
export interface AccountFiles {
  get(accountId: string, id: string): Promise<FileRecord | null>;
  /** The bytes chunk by chunk, each checked against its checksum; null when absent. */
  read(accountId: string, id: string): Promise<{ file: FileRecord; chunks: AsyncIterable<Buffer> } | null>;
  list(accountId: string, query: { purpose?: string; limit: number; order: "asc" | "desc"; after?: string }): Promise<FileRecord[]>;
  delete(accountId: string, id: string): Promise<boolean>;
}

const notFound = (id: string) => new NotFound(`No file with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/** The Files API, scoped to the caller's account: upload (multipart), list, get, content, delete. */
export function fileRoutes(app: FastifyInstance, batches: BatchService, files: AccountFiles, limits: BatchLimits): void {
  // One file, one byte over its limit: the service sees the limit passed and answers 413.
  const multipartLimits = { fileSize: limits.maxFileBytes + 1, files: 1, fields: 8, fieldSize: 1024, parts: 10, headerPairs: 64 };
  uploadScope(app, new UploadGate(limits), multipartLimits, (uploads) => {
    route(uploads, fileOperations.create, async (request, reply) => {
      requireMultipart(request, "Upload the file as multipart/form-data with the fields 'file' and 'purpose'.", "file");
      // Refused partway (the quota, the file's limit) or before any of it was read (rate limit, budget): form-upload.ts.
      return answerUpload(request, reply, async () =>
        toWireFile(await batches.uploadFile(callerOf(request), formParts(request, ["file"], "file"))),
      );
    });
  });

  route(app, fileOperations.list, async (request) => {
    const query = parseRequest(listFilesQuery, request.query ?? {});
    if (query.after !== undefined && !(await files.get(callerOf(request).accountId, query.after))) throw unknownCursor("file", query.after);
    const page = await files.list(callerOf(request).accountId, { ...query, limit: query.limit + 1 });
    return toListPage(page, query.limit, toWireFile);
  });

  route<{ Params: { id: string } }>(app, fileOperations.retrieve, async (request) => {
    const file = await files.get(callerOf(request).accountId, request.params.id);
    if (!file) throw notFound(request.params.id);
    return toWireFile(file);
  });

  // Streamed out of storage a few chunks at a time, uncompressed (no CPU spent on it beside the
  // engine); a chunk that fails its checksum cuts the response short.
  route<{ Params: { id: string } }>(
    app,
    fileOperations.content,
    async (request, reply) => {
      const found = await files.read(callerOf(request).accountId, request.params.id);
      if (!found) throw notFound(request.params.id);
      reply.type("application/octet-stream").header("content-length", found.file.bytes);
      return reply.send(Readable.from(found.chunks));
    },
    { compress: false },
  );

  route<{ Params: { id: string } }>(app, fileOperations.delete, async (request) => {
    if (!(await files.delete(callerOf(request).accountId, request.params.id))) throw notFound(request.params.id);
    return { id: request.params.id, object: "file", deleted: true };
  });
}
