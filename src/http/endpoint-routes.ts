/**
 * The one route adapter: registers declared endpoints (api/endpoint.ts). The auth hook enforces the
 * declared auth (route config); here the declared schemas parse the path, query and body, `run`
 * gets the parsed input, and its answer is written with its status and rate-limit headers.
 */
import { Readable } from "node:stream";
import type { FastifyMultipartOptions } from "@fastify/multipart";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AdminEndpoint, Endpoint, EndpointAnswer, EndpointInput, EndpointSpec } from "../api/endpoint.js";
import { toErrorBody } from "../errors.js";
import { parse } from "../protocol/parse-input.js";
import { parseRequest } from "../protocol/parse-request.js";
import { tellRateLimits } from "./rate-limit-headers.js";
import { callerOf } from "./auth.js";
import { formParts, requireMultipart, uploadScope, whileUploading } from "./form-upload.js";
import { route } from "./route-spec.js";
import { abortOnDisconnect, midStreamFailure } from "./runs.js";
import { openSse } from "./sse.js";
import type { UploadGate } from "./upload-gate.js";

type AnyEndpoint = Endpoint | AdminEndpoint;

export function registerEndpoints(app: FastifyInstance, endpoints: Iterable<AnyEndpoint>): void {
  for (const endpoint of endpoints) {
    route(
      app,
      endpoint,
      async (request, reply) => {
        // Rights first: a key that lacks one is refused whatever its body holds.
        const run = runnerFor(endpoint, request);
        const input = inputOf(endpoint, request);
        // A form is read as `run` goes: refused partway, the rest of the body is drained first (form-upload.ts).
        return send(request, reply, await (endpoint.form ? whileUploading(request, reply, () => run(input)) : run(input)));
      },
      uncompressed(endpoint),
    );
  }
}

/** Bytes (a file's content) go as they are read from storage: no CPU spent compressing them beside the engine. */
const uncompressed = (endpoint: EndpointSpec) =>
  endpoint.response.contentType === "application/octet-stream" ? { compress: false as const } : {};

/**
 * Endpoints whose body is a form (`form`) in an upload scope of their own (form-upload.ts): the
 * multipart parser within `limits`, a slot of `gate` per upload. The others as usual.
 */
export function registerUploadEndpoints(
  app: FastifyInstance,
  endpoints: AnyEndpoint[],
  gate: UploadGate,
  limits: NonNullable<FastifyMultipartOptions["limits"]>,
): void {
  uploadScope(app, gate, limits, (uploads) =>
    registerEndpoints(
      uploads,
      endpoints.filter((e) => e.form),
    ),
  );
  registerEndpoints(
    app,
    endpoints.filter((e) => !e.form),
  );
}

const isAdmin = (endpoint: AnyEndpoint): endpoint is AdminEndpoint => endpoint.auth === "admin";

/** `run` for the request's caller: the key's principal, its rights checked now; behind the admin key, none. */
function runnerFor(endpoint: AnyEndpoint, request: FastifyRequest): (input: EndpointInput) => Promise<EndpointAnswer> {
  if (isAdmin(endpoint)) return (input) => endpoint.run(null, input);
  const caller = callerOf(request);
  endpoint.authorize?.(caller);
  return (input) => endpoint.run(caller, input);
}

/** The request's parameters, query and body, each parsed as the endpoint declares (a 400 naming the parameter). */
export function inputOf(endpoint: EndpointSpec & Pick<Endpoint, "parseQuery">, request: FastifyRequest): EndpointInput {
  const raw = (request.query ?? {}) as Record<string, unknown>;
  return {
    params: pathParams(endpoint, request.params as Record<string, string>),
    query: endpoint.parseQuery
      ? endpoint.parseQuery(raw)
      : endpoint.query && !Array.isArray(endpoint.query)
        ? parse(endpoint.query, raw)
        : raw,
    body: bodyOf(endpoint, request),
  };
}

function bodyOf(endpoint: EndpointSpec, request: FastifyRequest): unknown {
  const { form } = endpoint;
  if (form) {
    requireMultipart(request, form.notMultipart.message, form.notMultipart.param);
    return formParts(request, form.files, form.param);
  }
  if (!endpoint.body) return request.body;
  return endpoint.bodyOptional ? parse(endpoint.body, request.body ?? {}) : parseRequest(endpoint.body, request.body);
}

/** A trailing wildcard's value (an id that holds a slash) under the declared parameter's name. */
function pathParams(spec: EndpointSpec, params: Record<string, string> = {}): Record<string, string> {
  const wildcard = params["*"];
  const name = spec.pathParams?.[0]?.name;
  return wildcard !== undefined && name ? { ...params, [name]: wildcard } : params;
}

async function send(request: FastifyRequest, reply: FastifyReply, answer: EndpointAnswer): Promise<FastifyReply | undefined> {
  // Set before the body is sent; the rate-limit hook (rate-limit-headers.ts) then leaves them be.
  tellRateLimits(reply, answer.rateLimits);
  if (answer.status) reply.code(answer.status);
  switch (answer.type) {
    case "json":
      return reply.send(answer.value);
    case "json-text":
      return reply.type("application/json; charset=utf-8").send(answer.text);
    case "bytes":
      // A chunk that fails its checksum (storage/files.ts) cuts the response short.
      if (answer.length !== undefined) reply.header("content-length", answer.length);
      return reply.type(answer.contentType).send(Readable.from(answer.chunks));
    case "events":
      await sendEvents(request, reply, answer.follow);
      return undefined;
  }
}

/** Events as server-sent events until they end or the client leaves; a failure after the headers is an `error` event. */
async function sendEvents(request: FastifyRequest, reply: FastifyReply, follow: Extract<EndpointAnswer, { type: "events" }>["follow"]) {
  const signal = abortOnDisconnect(reply);
  const sse = openSse(reply);
  try {
    for await (const chunk of follow(signal)) sse.event(chunk.event ?? "message", chunk.data);
  } catch (error) {
    sse.event("error", { ...toErrorBody(midStreamFailure(request, error)).error, type: "error" });
  }
  sse.end();
}
