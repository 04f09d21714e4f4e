import http from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ServiceError, toErrorBody } from "../errors.js";
import { attributeConnection, ConnectionAccounting, type ConnectionCaps } from "./connection-caps.js";

/**
 * Guards at the connection level, below Fastify's routes: the answers Node's HTTP parser gives
 * (bad Content-Length, request timeout) in the OpenAI error shape, and a per-IP cap on connections
 * that have not (yet) presented a valid key, so a few peers trickling bodies a byte at a time
 * cannot hold an unbounded number of sockets. With `caps`, also the caps on open connections in all,
 * per key and per account, and the keep-alive timeout (connection-caps.ts).
 */
export interface ConnectionLimits {
  /** Time to receive a whole request, headers and body (Node's requestTimeout); 408 beyond. */
  requestTimeoutMs: number;
  /** Open connections per client IP that have not yet made an authenticated request. */
  maxUnauthenticatedPerIp: number;
  /** Unsent bytes a streamed response may hold before its generation pauses. */
  streamBufferBytes: number;
  /** How long a stream may stay paused on a full buffer before it is ended. */
  streamPauseTimeoutMs: number;
  /** Caps on open connections (in all, per key, per account) and the keep-alive timeout; absent: Node's and Fastify's defaults. */
  caps?: ConnectionCaps;
}

/** Node checks its request timeouts on this interval; the default (30 s) would blur a short timeout. */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/**
 * Node's own server options. The request timeout must be given here: Node 20 reads it when the
 * server is created, and Fastify's `requestTimeout`, set on the server afterwards, never takes effect.
 */
export function httpServerOptions(limits: ConnectionLimits): http.ServerOptions {
  return {
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
    // The Host check is ours (onRequest), so a missing Host gets an OpenAI-shaped 400 instead of an empty one.
    requireHostHeader: false,
  };
}

/** Writes an OpenAI error straight onto a socket whose request the HTTP parser rejected. */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const [status, message, code] =
    error.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "The request was not received in time; send the whole request (headers and body) promptly.", "request_timeout"]
      : error.code === "HPE_HEADER_OVERFLOW"
        ? [431, "The request headers are too large.", "headers_too_large"]
        : [400, "The HTTP request is malformed (check Content-Length, Transfer-Encoding and the request line).", "malformed_request"];
  const body = JSON.stringify(toErrorBody(new ServiceError(status, "invalid_request_error", message, code)));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

const authenticatedSockets = new WeakSet<Socket>();

/**
 * Marks the request's connection as belonging to a caller with a valid key: no longer capped per IP,
 * but attributed to the caller's key and account. Throws 429 `too_many_connections` (and the
 * connection closes after that answer) when the key or account already holds its cap.
 */
export function markAuthenticated(request: FastifyRequest, caller: { keyId: string; accountId: string }): void {
  const socket = request.raw.socket;
  if (authenticatedSockets.has(socket)) return;
  attributeConnection(socket, caller.keyId, caller.accountId);
  authenticatedSockets.add(socket);
  socket.emit("switchyard:authenticated");
}

export function installConnectionGuards(app: FastifyInstance, limits: ConnectionLimits): void {
  const unauthenticated = new Map<string, number>();
  app.server.on("connection", (socket: Socket) => {
    const ip = socket.remoteAddress ?? "unknown";
    const open = unauthenticated.get(ip) ?? 0;
    if (open >= limits.maxUnauthenticatedPerIp) {
      socket.destroy();
      return;
    }
    unauthenticated.set(ip, open + 1);
    let counted = true;
    const uncount = () => {
      if (!counted) return;
      counted = false;
      const left = (unauthenticated.get(ip) ?? 1) - 1;
      if (left <= 0) unauthenticated.delete(ip);
      else unauthenticated.set(ip, left);
    };
    socket.once("switchyard:authenticated", uncount);
    socket.once("close", uncount);
  });
  // After the per-IP guard, so a connection it refuses never makes an idle one give way.
  if (limits.caps) new ConnectionAccounting(limits.caps).install(app.server);
  app.addHook("onRequest", (request, _reply, done) => {
    if (!request.headers.host) {
      return done(new ServiceError(400, "invalid_request_error", "The request has no Host header.", "missing_host"));
    }
    done();
  });
}
