import { context, propagation, SpanKind, SpanStatusCode, trace, type Span } from "@opentelemetry/api";
import { Agent, request, type Dispatcher } from "undici";
import { UpstreamRejected } from "../backend.js";

/** Keep-alive connections to the replicas, reused across requests (no handshake per request). */
export function createAgent(): Agent {
  return new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, connect: { timeout: 5_000 } });
}

/** The replica failed the request before streaming (it may succeed on another replica). */
export class ReplicaFailed extends Error {
  constructor(
    message: string,
    /** Unreachable or dropped the connection: the replica is likely gone. */
    readonly fatal: boolean,
    /** A fault of the replica (counts against its breaker), not just "busy" (429). */
    readonly replicaFault: boolean,
  ) {
    super(message);
  }
}

export interface OpenedStream {
  body: Dispatcher.ResponseData["body"];
}

/**
 * POSTs one request and returns its body once the upstream has answered 200. Anything else
 * becomes UpstreamRejected (the request itself is wrong: 400, 413, 422) or ReplicaFailed.
 */
export async function openStream(
  url: string,
  body: string,
  apiKey: string | undefined,
  agent: Agent,
  signal: AbortSignal,
): Promise<OpenedStream> {
  const span = upstreamSpan(url);
  let response: Dispatcher.ResponseData;
  try {
    response = await request(url, {
      method: "POST",
      dispatcher: agent,
      signal,
      headers: tracedHeaders(span, {
        "content-type": "application/json",
        accept: "text/event-stream",
        ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
      }),
      body,
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR }).end();
    if (signal.aborted) throw signal.reason;
    throw new ReplicaFailed(`cannot reach it: ${(error as Error).message}`, true, true);
  }
  span.setAttribute("http.response.status_code", response.statusCode);
  // The call lasts until its stream is read to the end or dropped.
  response.body.once("close", () => span.end());
  if (response.statusCode === 200) return { body: response.body };
  span.setStatus({ code: SpanStatusCode.ERROR });
  const text = await response.body.text().catch(() => "");
  const error = parseError(text);
  const message = error?.message ?? `HTTP ${response.statusCode}`;
  if ([400, 413, 422].includes(response.statusCode)) throw rejection(message, error);
  throw new ReplicaFailed(`it answered ${response.statusCode}: ${message}`, false, response.statusCode !== 429);
}

/**
 * A client span for one call to an upstream, the child of the request being served (the active
 * context). Without a tracer registered (tracing off) OpenTelemetry's API makes it a no-op.
 */
function upstreamSpan(url: string): Span {
  const { hostname, port, pathname, protocol } = new URL(url);
  return trace.getTracer("switchyard").startSpan(`POST ${pathname}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      "http.request.method": "POST",
      "server.address": hostname,
      "server.port": Number(port) || (protocol === "https:" ? 443 : 80),
      "url.path": pathname,
    },
  });
}

/** The headers with the span's W3C `traceparent`, so the upstream's own trace joins the request's. */
function tracedHeaders(span: Span, headers: Record<string, string>): Record<string, string> {
  propagation.inject(trace.setSpan(context.active(), span), headers);
  return headers;
}

interface WireError {
  message?: string;
  code?: string | number | null;
  param?: string | null;
}

function parseError(text: string): WireError | null {
  try {
    const parsed = JSON.parse(text) as { error?: WireError | string; message?: string };
    if (typeof parsed.error === "string") return { message: parsed.error };
    return parsed.error ?? (parsed.message ? { message: parsed.message } : null);
  } catch {
    return text ? { message: text.slice(0, 500) } : null;
  }
}

/** vLLM, llama-server and OpenAI word context overflows differently; all become context_length_exceeded. */
const CONTEXT_OVERFLOW = /context length|context size|context window|maximum context|too many tokens|exceeds the available context/i;

function rejection(message: string, error: WireError | null): UpstreamRejected {
  const code = typeof error?.code === "string" ? error.code : null;
  if (code === "context_length_exceeded" || CONTEXT_OVERFLOW.test(message))
    return new UpstreamRejected(message, "context_length_exceeded", error?.param ?? "messages");
  return new UpstreamRejected(message, code ?? "invalid_request_error", error?.param ?? null);
}

/** GET `<base>/models`: the replica answers and knows its models. */
export async function probe(baseUrl: string, apiKey: string | undefined, agent: Agent, timeoutMs: number): Promise<boolean> {
  try {
    const response = await request(`${baseUrl}/models`, {
      dispatcher: agent,
      signal: AbortSignal.timeout(timeoutMs),
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    });
    await response.body.dump();
    return response.statusCode === 200;
  } catch {
    return false;
  }
}
