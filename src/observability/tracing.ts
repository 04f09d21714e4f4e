/**
 * OpenTelemetry traces, exported over OTLP/HTTP (protobuf) when the standard variables ask for it:
 * `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, `OTEL_SDK_DISABLED` not
 * `true`. Off, the SDK is never loaded and requests get no trace at all (serving's UNTRACED).
 */
import type { IncomingHttpHeaders } from "node:http";
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Tracer } from "@opentelemetry/api";
import { tracingEnvironment, type Environment } from "../config/environment.js";
import type { RequestTrace, TraceAttributes } from "../serving/ports.js";

/** One API request's trace, as the HTTP layer holds it: serving reports to it, the response ends it. */
export interface TracedRequest extends RequestTrace {
  end(statusCode: number): void;
}

export interface Tracing {
  /** A span for one API request: the child of the caller's W3C `traceparent`, when it sent one. */
  request(operation: string, headers: IncomingHttpHeaders): TracedRequest;
  /** Exports the spans still queued, giving up after `timeoutMs` (an exporter that is down never holds a stop). */
  shutdown(timeoutMs: number): Promise<void>;
}

/** Whether the environment asks for traces: an OTLP endpoint is set and the SDK is not disabled. */
export function tracingRequested(env: Environment): boolean {
  return tracingEnvironment(env).requested;
}

/** Starts the SDK when the environment (handed in; config/environment.ts reads it) asks for it (see tracingRequested); null otherwise. */
export async function startTracing(env: Environment): Promise<Tracing | null> {
  const settings = tracingEnvironment(env);
  if (!settings.requested) return null;
  // Loaded only when tracing is on: a server without it never pays for the SDK.
  const [{ NodeTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/exporter-trace-otlp-proto"),
    import("@opentelemetry/resources"),
  ]);
  // The exporter reads the endpoint, headers and timeout from the standard variables itself.
  const exporter = new OTLPTraceExporter();
  // Bounded: at most maxQueueSize spans wait (more are dropped, never buffered without end); each
  // export runs in the background, so an exporter that is down costs a request nothing.
  const processor = new BatchSpanProcessor(exporter, {
    maxQueueSize: settings.maxQueueSize,
    maxExportBatchSize: settings.maxExportBatchSize,
    scheduledDelayMillis: settings.scheduledDelayMillis,
    exportTimeoutMillis: settings.exportTimeoutMillis,
  });
  const resource = resourceFromAttributes({ "service.name": settings.serviceName });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  // Global: the W3C propagator and the async context that carry a request's span to its upstream calls.
  provider.register();
  const tracer = trace.getTracer("switchyard");
  return {
    request: (operation, headers) => tracedRequest(tracer, operation, headers),
    shutdown: (timeoutMs) => withinTime(provider.shutdown(), timeoutMs),
  };
}

function tracedRequest(tracer: Tracer, operation: string, headers: IncomingHttpHeaders): TracedRequest {
  const parent = propagation.extract(ROOT_CONTEXT, headers);
  const span = tracer.startSpan(
    operation,
    {
      kind: SpanKind.SERVER,
      startTime: preciseNow(),
      attributes: { "gen_ai.operation.name": operation, "gen_ai.provider.name": "switchyard", "gen_ai.system": "switchyard" },
    },
    parent,
  );
  const within = trace.setSpan(parent, span);
  return {
    annotate(attributes: TraceAttributes) {
      span.setAttributes(attributes);
      // The conventions name the span `{operation} {model}` once the model is known.
      const model = attributes["gen_ai.request.model"];
      if (typeof model === "string") span.updateName(`${operation} ${model}`);
    },
    stage(name) {
      const stage = tracer.startSpan(name, { kind: SpanKind.INTERNAL, startTime: preciseNow() }, within);
      return { end: (attributes) => stage.setAttributes(attributes ?? {}).end(preciseNow()) };
    },
    within: (work) => context.with(within, work),
    end(statusCode) {
      span.setAttribute("http.response.status_code", statusCode);
      // A server span is an error for a 5xx only: a 4xx is the caller's.
      if (statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end(preciseNow());
    },
  };
}

/**
 * Now in epoch milliseconds with its fraction, from one monotonic clock. The SDK starts a span at
 * `Date.now()`, whole milliseconds, so of two stages a sub-millisecond apart the second could start
 * "before" the first ended; stages timed on this clock keep their real order.
 */
function preciseNow(): number {
  return performance.timeOrigin + performance.now();
}

/** Waits for `work` at most `timeoutMs`; its failure is not the caller's (a stop goes on). */
async function withinTime(work: Promise<unknown>, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs).unref()));
  await Promise.race([work.catch(() => undefined), timeout]);
  clearTimeout(timer);
}
