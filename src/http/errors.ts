import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ServiceError } from "../errors.js";

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** The one place where any error becomes the OpenAI error body. */
export function toErrorBody(error: ServiceError): ErrorBody {
  return { error: { message: error.message, type: error.type, param: error.param, code: error.code } };
}

/** Fastify's own request errors (bad JSON, body too large, wrong content type) in the same shape. */
function fromFastifyError(error: FastifyError): ServiceError | undefined {
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ServiceError(413, "invalid_request_error", "Request body is too large.", "request_too_large");
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new ServiceError(415, "invalid_request_error", "Content-Type must be application/json.", "unsupported_media_type");
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new ServiceError(400, "invalid_request_error", "The request body is empty; send a JSON object.", "invalid_json");
  }
  if (error instanceof SyntaxError || error.code === "FST_ERR_CTP_INVALID_JSON_BODY") {
    return new ServiceError(400, "invalid_request_error", `The request body is not valid JSON: ${error.message}`, "invalid_json");
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return new ServiceError(error.statusCode, "invalid_request_error", error.message, error.code ?? null);
  }
  return undefined;
}

/**
 * The router's own refusals, before any route or hook runs: a path that is not valid
 * percent-encoding, and a path parameter longer than the router takes (100 characters; no id is
 * that long). Fastify's default bodies echo the whole URL; these echo nothing of it.
 */
export function frameworkErrors(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const known =
    error.code === "FST_ERR_BAD_URL"
      ? new ServiceError(400, "invalid_request_error", "The request URL is not valid percent-encoding.", "invalid_url")
      : error.code === "FST_ERR_MAX_PARAM_LENGTH"
        ? new ServiceError(
            414,
            "invalid_request_error",
            "A path parameter of the request URL is too long (at most 100 characters).",
            "path_parameter_too_long",
          )
        : new ServiceError(error.statusCode ?? 400, "invalid_request_error", "The request could not be routed.", error.code ?? null);
  void reply.status(known.status).type("application/json; charset=utf-8").send(toErrorBody(known));
}

const MAX_ECHOED_PATH = 100;

export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = error instanceof ServiceError ? error : fromFastifyError(error);
    if (!known) {
      request.log.error({ err: error }, "unhandled error");
      const internal = new ServiceError(500, "server_error", "The server had an error while processing your request.", "internal_error");
      return reply.status(500).send(toErrorBody(internal));
    }
    return reply.status(known.status).headers(known.headers).send(toErrorBody(known));
  });
  app.setNotFoundHandler((request, reply) => {
    // Only a short prefix of the path is echoed: never a long URL, never its query.
    const path = request.url.split("?")[0]!;
    const shown = path.length > MAX_ECHOED_PATH ? `${path.slice(0, MAX_ECHOED_PATH)}...` : path;
    const error = new ServiceError(404, "invalid_request_error", `Unknown request URL: ${request.method} ${shown}.`, "unknown_url");
    return reply.status(404).send(toErrorBody(error));
  });
}
