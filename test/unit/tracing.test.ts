import assert from "node:assert/strict";
import { test } from "node:test";
import { startTracing, tracingRequested } from "../../src/observability/tracing.js";
import type { RequestTrace, TraceAttributes } from "../../src/serving/ports.js";
import { operationName, tracedEvents, UNTRACED } from "../../src/serving/run-trace.js";
import type { ServingEvent } from "../../src/serving/types.js";

test("tracing is on only with an OTLP endpoint, and OTEL_SDK_DISABLED=true turns it off", async () => {
  assert.equal(tracingRequested({}), false);
  assert.equal(tracingRequested({ OTEL_SERVICE_NAME: "x" }), false);
  assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }), true);
  assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:4318/v1/traces" }), true);
  assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_SDK_DISABLED: "TRUE" }), false);
  assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_SDK_DISABLED: "false" }), true);
  assert.equal(await startTracing({}), null);
});

test("operation names follow the GenAI conventions", () => {
  assert.equal(operationName("chat.completions"), "chat");
  assert.equal(operationName("responses"), "chat");
  assert.equal(operationName("completions"), "text_completion");
  assert.equal(operationName("embeddings"), "embeddings");
});

/** A trace that writes down what it is told, in order. */
function recordingTrace() {
  const log: string[] = [];
  const attributes: TraceAttributes = {};
  const trace: RequestTrace = {
    annotate: (a) => Object.assign(attributes, a),
    stage(name) {
      log.push(`start ${name}`);
      return { end: () => log.push(`end ${name}`) };
    },
    within: (work) => work(),
  };
  return { trace, log, attributes };
}

async function* events(list: ServingEvent[]): AsyncGenerator<ServingEvent> {
  yield* list;
}

const counts = { completionTokens: 1, reasoningTokens: 0 };
const usage = {
  promptTokens: 5,
  cachedPromptTokens: 2,
  completionTokens: 3,
  reasoningTokens: 0,
  acceptedPredictionTokens: 0,
  rejectedPredictionTokens: 0,
  cost: "0.00000123",
};

test("prefill ends at the first output, decode at the last choice's finish; usage and finish reasons go on the span", async () => {
  const { trace, log, attributes } = recordingTrace();
  const run = events([
    { type: "text", index: 0, text: "a", ...counts },
    { type: "text", index: 1, text: "b", ...counts },
    { type: "finish", index: 1, finishReason: "length" },
    { type: "finish", index: 0, finishReason: "stop" },
    { type: "done", finishReason: "stop", usage },
  ]);
  const seen = [];
  for await (const event of tracedEvents(run, trace, 2)) seen.push(event.type);
  assert.deepEqual(seen, ["text", "text", "finish", "finish", "done"]);
  assert.deepEqual(log, ["start switchyard.prefill", "end switchyard.prefill", "start switchyard.decode", "end switchyard.decode"]);
  assert.deepEqual(attributes["gen_ai.response.finish_reasons"], ["length", "stop"]);
  assert.equal(attributes["gen_ai.usage.input_tokens"], 5);
  assert.equal(attributes["gen_ai.usage.output_tokens"], 3);
  assert.equal(attributes["gen_ai.usage.cache_read.input_tokens"], 2);
  assert.equal(attributes["switchyard.usage.estimated_cost"], "0.00000123");
});

test("a run left early ends the stages it had open, once", async () => {
  const { trace, log } = recordingTrace();
  const traced = tracedEvents(events([{ type: "text", index: 0, text: "a", ...counts }]), trace, 1);
  await traced.next();
  await traced.return(undefined);
  assert.deepEqual(log, ["start switchyard.prefill", "end switchyard.prefill", "start switchyard.decode", "end switchyard.decode"]);
});

test("untraced, a stage and annotations cost nothing and work runs as it is", () => {
  UNTRACED.annotate({ a: 1 });
  UNTRACED.stage("x").end();
  assert.equal(
    UNTRACED.within(() => 42),
    42,
  );
});
