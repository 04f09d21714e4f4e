import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { MINILM } from "../helpers/embeddings.js";
import { startOtlpReceiver, type ExportedSpan, type OtlpReceiver } from "../helpers/otlp.js";
import { startServer, waitFor, SMOLLM2, type RunningServer } from "../helpers/server.js";
import { startWorker, WORKER_KEY, type RunningWorker } from "../helpers/worker.js";

/** Generous: the machine may run at a quarter of its speed; these bound hangs, they time nothing. */
const LONG = { timeout: 300_000 };
const STAGES = ["switchyard.admission", "switchyard.queue", "switchyard.prefill", "switchyard.decode", "switchyard.ledger"];
const PROMPT = "Name three colours of the rainbow.";

/** A fresh W3C trace context: the ids a caller's own span would have. */
function callerContext() {
  const traceId = randomBytes(16).toString("hex");
  const parentId = randomBytes(8).toString("hex");
  return { traceId, parentId, traceparent: `00-${traceId}-${parentId}-01` };
}

/** Traced by the exporter: the env that points a server at the receiver, exporting every 100 ms. */
function otelEnv(receiver: OtlpReceiver, service: string): NodeJS.ProcessEnv {
  return { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: service, OTEL_BSP_SCHEDULE_DELAY: "100" };
}

const requestSpanOf = (spans: ExportedSpan[], service: string) => spans.find((s) => s.service === service && s.kind === 2);
const childrenOf = (spans: ExportedSpan[], parent: ExportedSpan) => spans.filter((s) => s.parent_span_id === parent.span_id);
/** The request span and every stage under it have arrived. */
const complete = (service: string, stages: string[]) => (spans: ExportedSpan[]) => {
  const request = requestSpanOf(spans, service);
  return request !== undefined && stages.every((name) => childrenOf(spans, request).some((s) => s.name === name));
};

describe("traces over OTLP/HTTP, decoded by a receiver with the official protos", () => {
  let receiver: OtlpReceiver;
  let server: RunningServer;
  const SERVICE = "switchyard-traced";

  before(async () => {
    receiver = await startOtlpReceiver();
    server = await startServer({ models: [SMOLLM2, MINILM], env: otelEnv(receiver, SERVICE) });
  });
  after(async () => {
    await server?.stop();
    receiver?.stop();
  });

  const client = (traceparent: string) =>
    new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000, maxRetries: 0, defaultHeaders: { traceparent } });

  /** The request span is the caller's child, its stages are its children, and nothing secret is in any of them. */
  function checkTrace(spans: ExportedSpan[], caller: ReturnType<typeof callerContext>, stages: string[]): ExportedSpan {
    const request = requestSpanOf(spans, SERVICE)!;
    assert.equal(request.trace_id, caller.traceId);
    assert.equal(request.parent_span_id, caller.parentId);
    assert.equal(request.path, "/v1/traces");
    assert.match(request.content_type, /application\/x-protobuf/);
    const children = childrenOf(spans, request);
    for (const name of stages)
      assert.ok(
        children.some((s) => s.name === name),
        `stage ${name} under the request span`,
      );
    const everything = JSON.stringify(spans);
    assert.ok(!everything.includes(server.key), "the API key is never exported");
    assert.ok(!everything.includes(PROMPT), "the prompt is never exported");
    return request;
  }

  test("a chat completion: the request span is the traceparent's child, with the response's usage and cost", LONG, async () => {
    const caller = callerContext();
    const response = await fetch(`${server.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json", traceparent: caller.traceparent },
      body: JSON.stringify({ model: SMOLLM2, messages: [{ role: "user", content: PROMPT }], max_tokens: 8 }),
    });
    assert.equal(response.status, 200);
    const text = await response.text();
    const reply = JSON.parse(text);
    const spans = await receiver.trace(caller.traceId, complete(SERVICE, STAGES));
    const request = checkTrace(spans, caller, STAGES);
    assert.equal(request.name, `chat ${SMOLLM2}`);
    const a = request.attributes;
    assert.equal(a["gen_ai.operation.name"], "chat");
    assert.equal(a["gen_ai.provider.name"], "switchyard");
    assert.equal(a["gen_ai.request.model"], SMOLLM2);
    assert.equal(a["gen_ai.response.model"], reply.model);
    assert.equal(a["gen_ai.response.id"], reply.id);
    assert.equal(a["switchyard.service_tier"], reply.service_tier);
    assert.equal(a["gen_ai.usage.input_tokens"], reply.usage.prompt_tokens);
    assert.equal(a["gen_ai.usage.output_tokens"], reply.usage.completion_tokens);
    assert.equal(a["gen_ai.usage.cache_read.input_tokens"], reply.usage.prompt_tokens_details.cached_tokens);
    assert.deepEqual(a["gen_ai.response.finish_reasons"], [reply.choices[0].finish_reason]);
    // The exact decimal, as the body wrote it (read from the text: JSON.parse would round it).
    assert.equal(a["switchyard.usage.estimated_cost"], /"estimated_cost":([0-9.]+)/.exec(text)![1]);
    assert.equal(a["http.response.status_code"], 200);
    assert.ok(!JSON.stringify(spans).includes(reply.choices[0].message.content), "the completion is never exported");
    // Stages in order: admitted, queued, prefill until the first token, decode after it.
    const stage = (name: string) => childrenOf(spans, request).find((s) => s.name === name)!;
    assert.ok(stage("switchyard.admission").end_ns <= stage("switchyard.queue").start_ns);
    assert.ok(stage("switchyard.queue").end_ns <= stage("switchyard.prefill").start_ns);
    assert.ok(stage("switchyard.prefill").end_ns <= stage("switchyard.decode").start_ns);
    assert.ok(stage("switchyard.decode").end_ns <= stage("switchyard.ledger").end_ns);
  });

  test("a streamed chat completion through the openai client: the same span, its usage from the last chunk", LONG, async () => {
    const caller = callerContext();
    const stream = await client(caller.traceparent).chat.completions.create({
      model: SMOLLM2,
      messages: [{ role: "user", content: PROMPT }],
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: (OpenAI.CompletionUsage & { estimated_cost?: number }) | undefined;
    let finishReason: string | null = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
    }
    assert.ok(usage);
    const spans = await receiver.trace(caller.traceId, complete(SERVICE, STAGES));
    const a = checkTrace(spans, caller, STAGES).attributes;
    assert.equal(a["gen_ai.usage.input_tokens"], usage.prompt_tokens);
    assert.equal(a["gen_ai.usage.output_tokens"], usage.completion_tokens);
    assert.deepEqual(a["gen_ai.response.finish_reasons"], [finishReason]);
    assert.equal(Number(a["switchyard.usage.estimated_cost"]), usage.estimated_cost);
  });

  test("an embeddings request gets its span, with its tokens and cost", LONG, async () => {
    const caller = callerContext();
    const result = await client(caller.traceparent).embeddings.create({ model: MINILM, input: ["a red apple", "a green pear"] });
    const stages = ["switchyard.admission", "switchyard.embed", "switchyard.ledger"];
    const spans = await receiver.trace(caller.traceId, complete(SERVICE, stages));
    const request = checkTrace(spans, caller, stages);
    assert.equal(request.name, `embeddings ${MINILM}`);
    assert.equal(request.attributes["gen_ai.operation.name"], "embeddings");
    assert.equal(request.attributes["gen_ai.usage.input_tokens"], result.usage.prompt_tokens);
    const cost = (result.usage as unknown as { estimated_cost: number }).estimated_cost;
    assert.equal(Number(request.attributes["switchyard.usage.estimated_cost"]), cost);
  });

  test("a request without traceparent starts a trace of its own", LONG, async () => {
    const before = new Set(receiver.spans.map((s) => s.trace_id));
    const reply = await new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000, maxRetries: 0 }).completions.create({
      model: SMOLLM2,
      prompt: "Once upon a time",
      max_tokens: 4,
    });
    const span = await waitFor(
      async () => receiver.spans.find((s) => s.kind === 2 && s.attributes["gen_ai.response.id"] === reply.id),
      60_000,
    );
    assert.equal(span.parent_span_id, "");
    assert.ok(!before.has(span.trace_id));
    assert.equal(span.attributes["gen_ai.operation.name"], "text_completion");
  });
});

describe("a gateway forwards traceparent to its upstream worker", () => {
  let receiver: OtlpReceiver;
  let worker: RunningWorker;
  let gateway: RunningServer;

  before(async () => {
    receiver = await startOtlpReceiver();
    worker = await startWorker({ ...otelEnv(receiver, "switchyard-worker"), SWITCHYARD_PARALLEL: "1", SWITCHYARD_THREADS: "1" });
    const catalog = join(mkdtempSync(join(tmpdir(), "switchyard-tracing-")), "catalog.json");
    const entry = {
      id: SMOLLM2,
      backend: { type: "openai", replicas: [worker.baseURL], api_key_env: "SWITCHYARD_WORKER_KEY" },
      context_length: 8192,
      precision: "q4_1",
      tags: [],
      pricing: { input: "0.02", output: "0.06", cached_input: "0.01", discount_percent: "0" },
      created: 1738886400,
    };
    writeFileSync(catalog, JSON.stringify({ models: [entry] }));
    const env = { ...otelEnv(receiver, "switchyard-gateway"), SWITCHYARD_CATALOG: catalog, SWITCHYARD_WORKER_KEY: WORKER_KEY };
    gateway = await startServer({ env });
  });
  after(async () => {
    await gateway?.stop();
    await worker?.stop();
    receiver?.stop();
  });

  test("the worker's request span is the child of the gateway's upstream call, in the caller's trace", LONG, async () => {
    const caller = callerContext();
    const client = new OpenAI({ apiKey: gateway.key, baseURL: gateway.baseURL, timeout: 120_000, maxRetries: 0 });
    await client.chat.completions.create(
      { model: SMOLLM2, messages: [{ role: "user", content: PROMPT }], max_tokens: 6 },
      { headers: { traceparent: caller.traceparent } },
    );
    const spans = await receiver.trace(
      caller.traceId,
      (found) => requestSpanOf(found, "switchyard-gateway") !== undefined && requestSpanOf(found, "switchyard-worker") !== undefined,
    );
    const atGateway = requestSpanOf(spans, "switchyard-gateway")!;
    assert.equal(atGateway.parent_span_id, caller.parentId);
    const call = spans.find((s) => s.service === "switchyard-gateway" && s.kind === 3);
    assert.ok(call, "the gateway's upstream call span");
    assert.equal(call.name, "POST /v1/chat/completions");
    assert.equal(call.parent_span_id, atGateway.span_id);
    const atWorker = requestSpanOf(spans, "switchyard-worker")!;
    assert.equal(atWorker.trace_id, caller.traceId);
    assert.equal(atWorker.parent_span_id, call.span_id, "the worker got the call span's traceparent");
  });
});

describe("tracing off", () => {
  let receiver: OtlpReceiver;
  let server: RunningServer;

  before(async () => {
    receiver = await startOtlpReceiver();
    server = await startServer({ env: { ...otelEnv(receiver, "switchyard-disabled"), OTEL_SDK_DISABLED: "true" } });
  });
  after(async () => {
    await server?.stop();
    receiver?.stop();
  });

  test("OTEL_SDK_DISABLED=true: the SDK is not started and nothing is exported, the endpoint notwithstanding", LONG, async () => {
    const caller = callerContext();
    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000, maxRetries: 0 });
    const reply = await client.chat.completions.create(
      { model: SMOLLM2, messages: [{ role: "user", content: PROMPT }], max_tokens: 4 },
      { headers: { traceparent: caller.traceparent } },
    );
    assert.ok(reply.id);
    // Well past the 100 ms export delay a running SDK would use.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    assert.deepEqual(receiver.spans, []);
    assert.ok(!server.logs().includes("tracing: exporting"), server.logs());
  });
});

/**
 * One server meets both ways an exporter's endpoint can be down, in turn (each once had a server of
 * its own): first nothing listens on its port, then a listener there accepts and never answers;
 * the stop comes while an export hangs on it and new connections are refused again.
 */
describe("an exporter that is down", () => {
  let endpoint: Awaited<ReturnType<typeof closedEndpoint>>;
  let server: RunningServer;

  before(async () => {
    endpoint = await closedEndpoint();
    server = await startServer({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint.url, OTEL_BSP_SCHEDULE_DELAY: "50" } });
  });
  after(async () => {
    await server?.stop();
    endpoint?.close();
  });

  async function requestsSucceed(): Promise<void> {
    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 120_000, maxRetries: 0 });
    for (let i = 0; i < 3; i++) {
      const reply = await client.chat.completions.create({ model: SMOLLM2, messages: [{ role: "user", content: PROMPT }], max_tokens: 4 });
      assert.equal(reply.object, "chat.completion");
      const stream = await client.chat.completions.create({
        model: SMOLLM2,
        messages: [{ role: "user", content: PROMPT }],
        max_tokens: 4,
        stream: true,
      });
      let chunks = 0;
      for await (const _ of stream) chunks++;
      assert.ok(chunks > 0);
    }
  }

  test("whose endpoint refuses connections: requests still succeed, streamed or not", LONG, async () => {
    assert.match(server.logs(), /tracing: exporting/);
    await requestsSucceed();
  });

  test("whose endpoint never answers: requests still succeed, streamed or not", LONG, async () => {
    await endpoint.silent();
    await requestsSucceed();
    await waitFor(async () => (endpoint.connections() > 0 ? true : undefined), 60_000); // an export hangs on it
  });

  test("the server still stops, with an export hanging and its endpoint refusing new connections again", LONG, async () => {
    endpoint.refuse(); // the hanging connections stay open
    await requestsSucceed();
    // The stop flushes what is queued, and gives up on an exporter that does not answer.
    await server.stop();
    assert.equal(server.process.exitCode, 0, server.logs());
  });
});

/**
 * A local URL whose port nothing listens on, until silent() listens there (a listener that accepts
 * connections and never answers, as an exporter's endpoint that hangs would) and refuse() stops
 * listening again, leaving the connections it holds open.
 */
async function closedEndpoint() {
  const { createServer } = await import("node:net");
  const held: import("node:net").Socket[] = [];
  const listener = createServer((socket) => held.push(socket));
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen(port, "127.0.0.1", () => resolve());
    });
  // Stops listening at once; close()'s callback would wait for the held connections to end.
  const refuse = () => {
    if (listener.listening) listener.close();
  };
  await listen(0);
  const { port } = listener.address() as { port: number };
  refuse();
  return {
    url: `http://127.0.0.1:${port}`,
    silent: () => listen(port),
    refuse,
    connections: () => held.length,
    close: () => {
      for (const socket of held) socket.destroy();
      refuse();
    },
  };
}
