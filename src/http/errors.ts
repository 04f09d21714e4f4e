import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { answerOf, bodyTooLarge, ServiceError, toErrorBody, unknownUrl } from "../errors.js";

/** Fastify's own request errors (bad JSON, body too large, wrong content type) in the same shape. */
function fromFastifyError(error: FastifyError): ServiceError | undefined {
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return bodyTooLarge();
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

export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = answerOf(error instanceof ServiceError ? error : (fromFastifyError(error) ?? error), (err) =>
      request.log.error({ err }, "unhandled error"),
    );
    return reply.status(known.status).headers(known.headers).send(toErrorBody(known));
  });
  app.setNotFoundHandler((request, reply) => {
    // Only a short prefix of the path is echoed: never a long URL, never its query.
    return reply.status(404).send(toErrorBody(unknownUrl(request.method, request.url)));
  });
}
