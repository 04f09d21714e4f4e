/**
 * Typed errors thrown anywhere in the service, and the one map from any error to its status and
 * OpenAI error body (`answerOf`): the HTTP layer (src/http/errors.ts) and the batch runner's lines
 * (src/batches/line-executor.ts) both answer through it; nothing else formats errors for the wire.
 */
export type ErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "rate_limit_error"
  | "insufficient_quota"
  | "server_error";

export class ServiceError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    message: string,
    readonly code: string | null = null,
    readonly param: string | null = null,
    /** Extra response headers, e.g. Retry-After. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class InvalidRequest extends ServiceError {
  constructor(message: string, param: string | null = null, code: string | null = null) {
    super(400, "invalid_request_error", message, code, param);
  }
}

export class Unauthorized extends ServiceError {
  constructor(message = "Invalid or missing API key. Send 'Authorization: Bearer <API_KEY>'.") {
    super(401, "authentication_error", message, "invalid_api_key");
  }
}

export class Forbidden extends ServiceError {
  constructor(message: string, code: string | null = null, param: string | null = null) {
    super(403, "permission_error", message, code, param);
  }
}

export class ModelNotFound extends ServiceError {
  constructor(model: string) {
    // Only a short prefix of what the caller sent is echoed back.
    const shown = model.length > 64 ? `${model.slice(0, 64)}...` : model;
    super(404, "invalid_request_error", `The model '${shown}' does not exist or you do not have access to it.`, "model_not_found", "model");
  }
}

export class NotFound extends ServiceError {
  constructor(message: string) {
    super(404, "not_found_error", message, "not_found");
  }
}

export class ContextLengthExceeded extends ServiceError {
  /** `atLeast`: the prompt's size is a lower bound, found before the prompt was rendered. */
  constructor(contextLength: number, promptTokens: number, maxTokens: number, atLeast = false, param = "messages") {
    super(
      400,
      "invalid_request_error",
      `This model's maximum context length is ${contextLength} tokens. However, you requested ${atLeast ? "at least " : ""}${promptTokens + maxTokens} tokens ` +
        `(${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      "context_length_exceeded",
      param,
    );
  }
}

export class PayloadTooLarge extends ServiceError {
  constructor(limitBytes: number) {
    super(413, "invalid_request_error", `Request body is larger than the limit of ${limitBytes} bytes.`, "request_too_large");
  }
}

export class RateLimited extends ServiceError {
  constructor(message: string, retryAfterSeconds: number, code = "rate_limit_exceeded", headers: Record<string, string> = {}) {
    super(429, "rate_limit_error", message, code, null, { ...headers, "retry-after": String(Math.max(1, Math.ceil(retryAfterSeconds))) });
  }
}

export class InsufficientQuota extends ServiceError {
  constructor(message: string) {
    super(402, "insufficient_quota", message, "insufficient_quota");
  }
}

export class CapacityUnavailable extends ServiceError {
  constructor(message: string, retryAfterSeconds = 1) {
    super(503, "server_error", message, "capacity_unavailable", null, { "retry-after": String(retryAfterSeconds) });
  }
}

/**
 * The server is stopping (SIGTERM): a new request during the drain, or a running one still going
 * when the drain timeout ran out. Also the abort reason of such a run, so its row says `interrupted`.
 */
export class ServerShuttingDown extends ServiceError {
  constructor() {
    super(
      503,
      "server_error",
      "The server is shutting down; retry the request (another instance, or this one once it is back).",
      "server_shutting_down",
      null,
      { "retry-after": "5", connection: "close" },
    );
  }
}

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** The one place where any error becomes the OpenAI error body. */
export function toErrorBody(error: ServiceError): ErrorBody {
  return { error: { message: error.message, type: error.type, param: error.param, code: error.code } };
}

/** What an error that is no ServiceError answers: its details stay in the log. */
export function internalError(): ServiceError {
  return new ServiceError(500, "server_error", "The server had an error while processing your request.", "internal_error");
}

/** A request body over the server's limit (SWITCHYARD_MAX_BODY_BYTES). */
export function bodyTooLarge(): ServiceError {
  return new ServiceError(413, "invalid_request_error", "Request body is too large.", "request_too_large");
}

/** A path no route serves; only a short prefix of it is echoed, never its query. */
export function unknownUrl(method: string, url: string): ServiceError {
  const path = url.split("?")[0]!;
  const shown = path.length > MAX_ECHOED_PATH ? `${path.slice(0, MAX_ECHOED_PATH)}...` : path;
  return new ServiceError(404, "invalid_request_error", `Unknown request URL: ${method} ${shown}.`, "unknown_url");
}

const MAX_ECHOED_PATH = 100;

/**
 * Any error as it is answered: a ServiceError as itself, anything else as a 500 whose details are
 * handed to `logInternal` (and never to the client).
 */
export function answerOf(error: unknown, logInternal: (error: unknown) => void): ServiceError {
  if (error instanceof ServiceError) return error;
  logInternal(error);
  return internalError();
}
