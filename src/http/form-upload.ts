import multipart, { type FastifyMultipartOptions, type Multipart } from "@fastify/multipart";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { InvalidRequest, ServiceError } from "../errors.js";
import type { FormPart } from "../protocol/form-parts.js";
import { callerOf } from "./auth.js";
import type { UploadGate } from "./upload-gate.js";

/**
 * Upload routes in a scope of their own: only they read multipart bodies, streamed a chunk at a
 * time, within the parser's `limits`. A slot of `gate` is taken before the body is read and freed
 * when the exchange ends, answered or cut off.
 */
export function uploadScope(
  app: FastifyInstance,
  gate: UploadGate,
  limits: NonNullable<FastifyMultipartOptions["limits"]>,
  routes: (uploads: FastifyInstance) => void,
): void {
  void app.register(async (uploads) => {
    await uploads.register(multipart, { limits });
    uploads.addHook("preParsing", async (request, reply) => {
      const release = gate.take(callerOf(request).accountId);
      reply.raw.once("close", release);
    });
    routes(uploads);
  });
}

/** A body that is not multipart/form-data is a 400: `message` says what the form holds. */
export function requireMultipart(request: FastifyRequest, message: string, param: string | null): void {
  if (!request.isMultipart()) throw new InvalidRequest(message, param, "invalid_content_type");
}

/**
 * The form's parts as they arrive: text fields, and the files of `fileFields` (any other file part is
 * drained unread). The parser's own failures (a malformed body, too many parts) are 400s naming `param`.
 */
export async function* formParts(request: FastifyRequest, fileFields: readonly string[], param: string): AsyncGenerator<FormPart> {
  const parts = request.parts()[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<Multipart>;
    try {
      next = await parts.next();
    } catch (error) {
      throw malformed(error, param);
    }
    if (next.done) return;
    const part = next.value;
    if (part.type === "field") yield { field: part.fieldname, value: String(part.value) };
    else if (fileFields.includes(part.fieldname))
      yield { file: part.fieldname, filename: part.filename, bytes: checkedBytes(part.file, param) };
    else part.file.resume();
  }
}

/**
 * Answers an upload with what `handle` makes of it. Refused partway through the body (a size limit,
 * a bad part): the parser stops reading it, so the connection cannot carry another request, and the
 * client is told to open a new one. Refused before any of it was read, Node reads and drops the body as usual.
 */
export async function answerUpload(request: FastifyRequest, reply: FastifyReply, handle: () => Promise<unknown>): Promise<FastifyReply> {
  try {
    return reply.send(await handle());
  } catch (error) {
    if (request.raw.readableDidRead && !request.raw.complete) reply.header("connection", "close");
    throw error;
  }
}

async function* checkedBytes(stream: AsyncIterable<Buffer>, param: string): AsyncGenerator<Buffer> {
  try {
    yield* stream;
  } catch (error) {
    throw malformed(error, param);
  }
}

const malformed = (error: unknown, param: string) =>
  error instanceof ServiceError
    ? error
    : new InvalidRequest(
        `The multipart/form-data body could not be read (${error instanceof Error ? error.message : String(error)}).`,
        param,
        "invalid_multipart",
      );
