import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { reapOnExit, ROOT, waitFor } from "./server.js";

/** One span as test/fixtures/otlp_receiver.py decoded it from the exporter's protobuf. */
export interface ExportedSpan {
  path: string;
  content_type: string;
  service: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  trace_id: string;
  span_id: string;
  /** "" for a root span. */
  parent_span_id: string;
  start_ns: number;
  end_ns: number;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number;
  attributes: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** The base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  url: string;
  /** Every span received so far. */
  spans: ExportedSpan[];
  /** Waits until the spans of `traceId` satisfy `done`, and returns them. */
  trace(traceId: string, done: (spans: ExportedSpan[]) => boolean, timeoutMs?: number): Promise<ExportedSpan[]>;
  stop(): void;
}

/** The Python with opentelemetry-proto that scripts/test-setup.sh makes in .cache/py-otel. */
function receiverPython(): string {
  const python = process.env.SWITCHYARD_TEST_OTEL_PYTHON ?? join(ROOT, ".cache/py-otel/bin/python");
  if (!existsSync(python)) throw new Error(`${python} is missing: run scripts/test-setup.sh (it makes the venv with opentelemetry-proto).`);
  return python;
}

/** Starts the receiver. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const args = [join(ROOT, "test/fixtures/otlp_receiver.py")];
  const child = reapOnExit(spawn(receiverPython(), args, { stdio: ["ignore", "pipe", "pipe"] }));
  let errors = "";
  child.stderr!.on("data", (d: Buffer) => (errors += d.toString()));
  const spans: ExportedSpan[] = [];
  let port: number | undefined;
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const record = JSON.parse(line) as ExportedSpan | { listening: number };
    if ("listening" in record) port = record.listening;
    else spans.push(record);
  });
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`the OTLP receiver exited:\n${errors}`);
    return port;
  }, 60_000);
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    trace: (traceId, done, timeoutMs = 60_000) =>
      waitFor(async () => {
        const found = spans.filter((s) => s.trace_id === traceId);
        return done(found) ? found : undefined;
      }, timeoutMs),
    stop: () => child.kill(),
  };
}
