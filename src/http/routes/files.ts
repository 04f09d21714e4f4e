import { Readable } from "node:stream";
import multipart, { type Multipart } from "@fastify/multipart";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { BatchLimits } from "../../batches/limits.js";
import type { BatchService, UploadPart } from "../../batches/service.js";
import { listPage, toWireFile } from "../../batches/wire.js";
import { InvalidRequest, NotFound, ServiceError } from "../../errors.js";
import { listFilesQuery } from "../../protocol/batches-request.js";
import { unknownCursor } from "../../protocol/list-page.js";
import type { FileStore } from "../../storage/files.js";
import { callerOf } from "../auth.js";
import { parseRequest } from "../chat-input.js";
import { UploadGate } from "../upload-gate.js";

const notFound = (id: string) => new NotFound(`No file with id '${id.length > 64 ? `${id.slice(0, 64)}...` : id}' found.`);

/** The Files API, scoped to the caller's account: upload (multipart), list, get, content, delete. */
export function fileRoutes(app: FastifyInstance, batches: BatchService, files: FileStore, limits: BatchLimits): void {
  const gate = new UploadGate(limits);
  void app.register(async (uploads) => {
    // Only this route reads multipart bodies, streamed: the file goes to storage a chunk at a time.
    await uploads.register(multipart, {
      limits: { fileSize: limits.maxFileBytes + 1, files: 1, fields: 8, fieldSize: 1024, parts: 10, headerPairs: 64 },
    });
    // The slot is taken before the body is read and freed when the exchange ends, answered or cut off.
    uploads.addHook("preParsing", async (request, reply) => {
      const release = gate.take(callerOf(request).accountId);
      reply.raw.once("close", release);
    });
    uploads.post("/files", async (request, reply) => {
      if (!request.isMultipart())
        throw new InvalidRequest(
          "Upload the file as multipart/form-data with the fields 'file' and 'purpose'.",
          "file",
          "invalid_content_type",
        );
      try {
        return reply.send(toWireFile(await batches.uploadFile(callerOf(request), formParts(request))));
      } catch (error) {
        // Refused partway through the body (the quota, the file's limit): the parser stops reading it, so
        // the connection cannot carry another request; the client is told to open a new one. Refused
        // before any of it was read (rate limit, budget), Node reads and drops the body as usual.
        if (request.raw.readableDidRead && !request.raw.complete) reply.header("connection", "close");
        throw error;
      }
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

/** The form's parts as they arrive; the parser's own failures (a malformed body, too many parts) are 400s. */
async function* formParts(request: FastifyRequest): AsyncGenerator<UploadPart> {
  const parts = request.parts()[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<Multipart>;
    try {
      next = await parts.next();
    } catch (error) {
      throw malformed(error);
    }
    if (next.done) return;
    const part = next.value;
    if (part.type === "field") yield { field: part.fieldname, value: String(part.value) };
    else if (part.fieldname === "file") yield { filename: part.filename, bytes: checkedBytes(part.file) };
    else part.file.resume();
  }
}

async function* checkedBytes(stream: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  try {
    yield* stream;
  } catch (error) {
    throw malformed(error);
  }
}

const malformed = (error: unknown) =>
  error instanceof ServiceError
    ? error
    : new InvalidRequest(
        `The multipart/form-data body could not be read (${error instanceof Error ? error.message : String(error)}).`,
        "file",
        "invalid_multipart",
      );
