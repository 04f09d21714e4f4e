/**
 * The Files API, scoped to the caller's account: upload (multipart/form-data, read as it streams),
 * list, retrieve, the bytes, delete. Uploads go through the batch service (quota, limits, the key's
 * rate limit and budget); the rest reads the file store.
 */
import type { BatchService } from "../../batches/service.js";
import { toWireFile } from "../../batches/wire.js";
import { NotFound } from "../../errors.js";
import { listFilesQuery, uploadFileForm } from "../../protocol/batches-request.js";
import type { FormPart } from "../../protocol/form-parts.js";
import { toListPage, unknownCursor } from "../../protocol/list-page.js";
import { parseRequest } from "../../protocol/parse-request.js";
import { bytes, json, type Endpoint, type EndpointInput, type EndpointSpec } from "../endpoint.js";

const fileId = [{ name: "id", description: "The file's id (`file-…`)." }];

export const fileSpecs = {
  create: {
    method: "post",
    path: "/files",
    id: "createFile",
    summary:
      "Upload a batch input file (multipart/form-data: `file`, `purpose: batch`). Limits: SWITCHYARD_FILE_MAX_BYTES per file (200 MB), SWITCHYARD_FILES_PER_ACCOUNT files and SWITCHYARD_FILE_BYTES_PER_ACCOUNT bytes per account",
    auth: "key",
    body: uploadFileForm,
    bodyType: "multipart/form-data",
    form: {
      files: ["file"],
      param: "file",
      notMultipart: { message: "Upload the file as multipart/form-data with the fields 'file' and 'purpose'.", param: "file" },
    },
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
} satisfies Record<string, EndpointSpec>;

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

type ById = EndpointInput<{ id: string }>;
type ListQuery = ReturnType<typeof listFilesQuery.parse>;

export function fileEndpoints(batches: Pick<BatchService, "uploadFile">, files: AccountFiles): Endpoint[] {
  const create: Endpoint<EndpointInput<unknown, unknown, AsyncIterable<FormPart>>> = {
    ...fileSpecs.create,
    // Refused partway (the quota, the file's limit) or before any of it was read (rate limit, budget).
    run: async (caller, { body }) => json(toWireFile(await batches.uploadFile(caller, body))),
  };
  const list: Endpoint<EndpointInput<unknown, ListQuery>> = {
    ...fileSpecs.list,
    parseQuery: (raw) => parseRequest(listFilesQuery, raw),
    async run(caller, { query }) {
      if (query.after !== undefined && !(await files.get(caller.accountId, query.after))) throw unknownCursor("file", query.after);
      const page = await files.list(caller.accountId, { ...query, limit: query.limit + 1 });
      return json(toListPage(page, query.limit, toWireFile));
    },
  };
  const retrieve: Endpoint<ById> = {
    ...fileSpecs.retrieve,
    async run(caller, { params }) {
      const file = await files.get(caller.accountId, params.id);
      if (!file) throw notFound(params.id);
      return json(toWireFile(file));
    },
  };
  // Streamed out of storage a few chunks at a time (no CPU spent compressing it beside the engine); a
  // chunk that fails its checksum cuts the response short.
  const content: Endpoint<ById> = {
    ...fileSpecs.content,
    async run(caller, { params }) {
      const found = await files.read(caller.accountId, params.id);
      if (!found) throw notFound(params.id);
      return bytes(found.chunks, "application/octet-stream", found.file.bytes);
    },
  };
  const remove: Endpoint<ById> = {
    ...fileSpecs.delete,
    async run(caller, { params }) {
      if (!(await files.delete(caller.accountId, params.id))) throw notFound(params.id);
      return json({ id: params.id, object: "file", deleted: true });
    },
  };
  return [create, list, retrieve, content, remove];
}
