import multipart, { type FastifyMultipartOptions, type Multipart } from "@fastify/multipart";
import type { IncomingMessage } from "node:http";
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
 * What `handle` makes of an upload. Refused partway through the body (a size limit, a bad part), the
 * rest of the body is read and dropped before the answer, up to `REFUSED_BODY_DRAIN`: a client still
 * writing when the server closed would see a broken pipe, not the error. Past that bound the
 * connection is closed after the answer, and cannot carry another request.
 */
export async function whileUploading<T>(request: FastifyRequest, reply: FastifyReply, handle: () => Promise<T>): Promise<T> {
  try {
    return await handle();
  } catch (error) {
    if (request.raw.readableDidRead && !request.raw.complete && !(await drained(request.raw))) reply.header("connection", "close");
    throw error;
  }
}

/** How much of a refused upload's remaining body is read, and for how long, so that its client hears the refusal. */
const REFUSED_BODY_DRAIN = { bytes: 8 << 20, ms: 5_000 } as const;

/** Reads `body` to its end, unparsed; false if it ran past the drain bound or broke off first. */
function drained(body: IncomingMessage): Promise<boolean> {
  return new Promise((resolve) => {
    let seen = 0;
    const finish = (complete: boolean) => {
      clearTimeout(timer);
      body.off("data", count).off("end", ended).off("close", ended);
      resolve(complete);
    };
    const count = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > REFUSED_BODY_DRAIN.bytes) finish(false);
    };
    const ended = () => finish(body.complete);
    const timer = setTimeout(() => finish(false), REFUSED_BODY_DRAIN.ms);
    body.unpipe();
    body.on("data", count).once("end", ended).once("close", ended);
    body.resume();
  });
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
