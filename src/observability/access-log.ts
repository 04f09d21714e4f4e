import { LogController, type FastifyReply, type FastifyRequest } from "fastify";

/**
 * The access log: one line per answered request (method, path, status, milliseconds, request id),
 * at `debug` by default, so the default log level (`info`) writes none. Fastify's own request
 * logging wrote two lines at `info` for every request ("incoming request", "request completed"),
 * each a pino JSON line written synchronously to stdout. `info` writes the one line at the default
 * level; `off` none at all. A request that errored is logged at `error` whatever this says, as is
 * every other line Fastify logs (its error handler's, a stream's error, ...).
 */
export type AccessLogLevel = "off" | "debug" | "info";

/** Fastify's logController (`logController` in its options) with the access log at `level`. */
export function accessLogController(level: AccessLogLevel, path: (url: string) => string): LogController {
  return new AccessLogController(level, path);
}

class AccessLogController extends LogController {
  constructor(
    private readonly level: AccessLogLevel,
    private readonly path: (url: string) => string,
  ) {
    super();
  }

  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) {
      super.requestCompleted(error, request, reply);
      return;
    }
    if (this.level === "off") return;
    const log = reply.log as FastifyReply["log"] & { isLevelEnabled?(level: string): boolean };
    // pino's own check first: a line it would drop costs no object.
    if (log.isLevelEnabled && !log.isLevelEnabled(this.level)) return;
    log[this.level](
      { method: request.method, url: this.path(request.url), statusCode: reply.statusCode, ms: reply.elapsedTime },
      "request",
    );
  }
}
