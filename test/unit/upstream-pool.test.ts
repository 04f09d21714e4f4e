import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import { BackendBusy, BackendUnavailable, BackendWaitExpired } from "../../src/backends/backend.js";
import { ReplicaPool, type Claim } from "../../src/backends/upstream/replica-pool.js";
import { createUpstreamBackend } from "../../src/backends/upstream/upstream-backend.js";
import { QueueFullError, WaitExpiredError } from "../../src/engine/errors.js";
import { chatPrompt } from "../../src/backends/upstream/prompt.js";
import { Replica, rendezvousOrder, CONSECUTIVE_FAILURES } from "../../src/backends/upstream/replica.js";
import { requestBody } from "../../src/backends/upstream/request-body.js";
import { streamEvents } from "../../src/backends/upstream/stream-events.js";
import type { GenerationEvent } from "../../src/protocol/generation.js";

const replicas = (n: number, cap = 1) => Array.from({ length: n }, (_, i) => new Replica(i, `http://replica-${i}/v1`, cap));
const claim = (extra: Partial<Claim> = {}): Claim => ({ tier: "default", exclude: new Set(), ...extra });
const never = new AbortController().signal;

describe("the replica pool", () => {
  test("least-loaded: a second request goes to the idle replica", async () => {
    const pool = new ReplicaPool(replicas(2, 2), { maxWaiting: 10, flexMaxWaitMs: 1000 });
    const a = await pool.acquire(claim(), never);
    const b = await pool.acquire(claim(), never);
    assert.notEqual(a, b);
  });

  test("waiters are admitted in tier order, first come first served within a tier", async () => {
    const [replica] = replicas(1);
    const pool = new ReplicaPool([replica!], { maxWaiting: 10, flexMaxWaitMs: 60_000 });
    await pool.acquire(claim(), never);
    const order: string[] = [];
    const wait = (name: string, tier: Claim["tier"]) =>
      pool.acquire(claim({ tier }), never).then((r) => {
        order.push(name);
        return r;
      });
    const waits = [
      wait("batch", "batch"),
      wait("flex", "flex"),
      wait("default-1", "default"),
      wait("default-2", "default"),
      wait("priority", "priority"),
    ];
    assert.deepEqual(pool.waitingByTier(), { priority: 1, default: 2, flex: 1, batch: 1 });
    for (let i = 0; i < 5; i++) {
      pool.done(replica!, "default", "ok");
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(waits);
    assert.deepEqual(order, ["priority", "default-1", "default-2", "flex", "batch"]);
  });

  test("a request's n choices take their slots together: two n=2 requests on 2 slots never hold half each", async () => {
    const pool = new ReplicaPool(replicas(2, 1), { maxWaiting: 10, flexMaxWaitMs: 1000 });
    const first = await pool.acquireAll(claim({ count: 2 }), never);
    assert.equal(first.length, 2);
    let secondGot: Replica[] | undefined;
    const second = pool.acquireAll(claim({ count: 2 }), never).then((r) => (secondGot = r));
    pool.done(first[0]!, "default", "ok");
    await new Promise((r) => setImmediate(r));
    assert.equal(secondGot, undefined, "one free slot is not enough for a group of two");
    assert.equal(
      pool.replicas.reduce((n, r) => n + r.running, 0),
      1,
    );
    pool.done(first[1]!, "default", "ok");
    assert.equal((await second).length, 2);
  });

  test("a flex waiter expires; a full queue refuses at once (the engine's own refusals)", async () => {
    const pool = new ReplicaPool(replicas(1), { maxWaiting: 1, flexMaxWaitMs: 20 });
    await pool.acquire(claim(), never);
    await assert.rejects(pool.acquire(claim({ tier: "flex" }), never), WaitExpiredError);
    const queued = pool.acquire(claim(), never);
    await assert.rejects(pool.acquire(claim(), never), QueueFullError);
    pool.done(pool.replicas[0]!, "default", "ok");
    await queued;
  });

  test("the backend hands them on as the local engine's: BackendWaitExpired and BackendBusy, mapped in one place", async () => {
    const replica = createServer(() => {}); // answers nothing: its one slot stays taken
    await new Promise<void>((resolve) => replica.listen(0, "127.0.0.1", resolve));
    const { port } = replica.address() as AddressInfo;
    const backend = createUpstreamBackend({
      replicas: [`http://127.0.0.1:${port}/v1`],
      model: "m",
      maxConcurrency: 1,
      contextWindow: 1000,
      maxWaiting: 1,
      flexMaxWaitMs: 20,
      healthIntervalMs: 60_000,
    });
    const prompt = await backend.prepare([{ role: "user", content: "hi" }]);
    const params = (tier: Claim["tier"]) => ({ maxTokens: 1, sampling: { temperature: 0, topP: 1 }, stop: [], tier });
    const controller = new AbortController();
    const start = (tier: Claim["tier"]) => backend.generate(prompt, [params(tier)], controller.signal)[0]!.next();
    const started: Promise<unknown>[] = [];
    try {
      started.push(start("default"));
      await new Promise((resolve) => setTimeout(resolve, 50));
      await assert.rejects(start("flex"), BackendWaitExpired);
      started.push(start("default"));
      await assert.rejects(start("default"), BackendBusy);
    } finally {
      controller.abort(new Error("done"));
      await Promise.allSettled(started);
      await backend.close();
      replica.closeAllConnections();
      await new Promise((resolve) => replica.close(resolve));
    }
  });

  test("an aborted waiter leaves the queue with the abort's reason", async () => {
    const pool = new ReplicaPool(replicas(1), { maxWaiting: 10, flexMaxWaitMs: 1000 });
    await pool.acquire(claim(), never);
    const controller = new AbortController();
    const waiting = pool.acquire(claim(), controller.signal);
    controller.abort(new Error("gone"));
    await assert.rejects(waiting, /gone/);
    assert.equal(pool.waiting, 0);
  });

  test("prefix affinity: a key keeps its replica while it has a free slot, and yields when it has none", async () => {
    const pool = new ReplicaPool(replicas(3), { maxWaiting: 10, flexMaxWaitMs: 1000 });
    const key = "account-1\u0000You are a librarian.";
    const preferred = rendezvousOrder(key, pool.replicas)[0]!;
    const first = await pool.acquire(claim({ affinityKey: key }), never);
    assert.equal(first, preferred);
    const second = await pool.acquire(claim({ affinityKey: key }), never);
    assert.notEqual(second, preferred, "the preferred replica is full: another one takes it now");
    pool.done(first, "default", "ok");
    pool.done(second, "default", "ok");
    assert.equal(await pool.acquire(claim({ affinityKey: key }), never), preferred);
  });

  test("a retry avoids the replicas it failed on; with none left it is unavailable", async () => {
    const pool = new ReplicaPool(replicas(2), { maxWaiting: 10, flexMaxWaitMs: 1000 });
    const [a, b] = pool.replicas;
    assert.equal(await pool.acquire(claim({ exclude: new Set([a!]) }), never), b);
    pool.done(b!, "default", "ok");
    await assert.rejects(pool.acquire(claim({ exclude: new Set([a!, b!]) }), never), BackendUnavailable);
  });
});

describe("the circuit breaker", () => {
  test("a connection failure takes a replica down at once; 5xx answers after a run of them; success brings it back", () => {
    const [r] = replicas(1);
    r!.failed(true);
    assert.equal(r!.health, "down");
    assert.equal(r!.available(), false, "no request during the cooldown");
    assert.equal(r!.available(Date.now() + 60_000), true, "one trial once the cooldown is over");
    r!.succeeded();
    for (let i = 1; i < CONSECUTIVE_FAILURES; i++) r!.failed();
    assert.equal(r!.health, "up");
    r!.failed();
    assert.equal(r!.health, "down");
  });

  test("the pool skips a down replica", async () => {
    const pool = new ReplicaPool(replicas(2, 4), { maxWaiting: 10, flexMaxWaitMs: 1000 });
    pool.replicas[0]!.failed(true);
    for (let i = 0; i < 3; i++) assert.equal(await pool.acquire(claim(), never), pool.replicas[1]);
  });
});

describe("the upstream request and stream", () => {
  test("the token count is an upper bound: at least one token per byte plus the template's markers", () => {
    const prompt = chatPrompt([{ role: "user", content: "héllo" }], [], {});
    assert.ok(prompt.tokenCount >= Buffer.byteLength("héllo") + 1);
    assert.equal(prompt.tokenCountIsUpperBound, true);
  });

  test("a forced tool becomes tool_choice, JSON output a response_format, the tier service_tier and an opaque prompt_cache_key", () => {
    const tool = { name: "get_weather", parameters: { type: "object" } };
    const prompt = chatPrompt([{ role: "user", content: "weather?" }], [tool], {});
    const params = {
      maxTokens: 5,
      sampling: { temperature: 0, topP: 1 },
      stop: [],
      constraint: { type: "tool_call" as const, tools: [tool] },
      tier: "priority" as const,
      cacheNamespace: "account-1",
    };
    const body = requestBody(prompt, params, { model: "m", sendPriority: true });
    assert.deepEqual(body.tool_choice, { type: "function", function: { name: "get_weather" } });
    assert.equal(body.service_tier, "priority");
    assert.equal(body.priority, -1);
    assert.deepEqual(body.stream_options, { include_usage: true });
    assert.match(String(body.prompt_cache_key), /^sy-[0-9a-f]{32}$/);
    assert.ok(!String(body.prompt_cache_key).includes("account-1"));
    const json = requestBody(prompt, { ...params, constraint: { type: "json" } }, { model: "m", sendPriority: false });
    assert.deepEqual(json.response_format, { type: "json_object" });
    assert.equal(json.priority, undefined);
  });

  test("the stream's usage is what the finish reports; tool call fragments are joined", async () => {
    const sse = [
      { choices: [{ delta: { content: "Hi" } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, id: "call_1", function: { name: "f", arguments: '{"a"' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: ":1}" } }] }, finish_reason: "tool_calls" }] },
      { choices: [], usage: { prompt_tokens: 12, completion_tokens: 9, prompt_tokens_details: { cached_tokens: 8 } } },
    ]
      .map((c) => `data: ${JSON.stringify(c)}\n\n`)
      .join("");
    const body = (async function* () {
      yield new TextEncoder().encode(`${sse}data: [DONE]\n\n`);
    })();
    const events: GenerationEvent[] = [];
    for await (const e of streamEvents(body, never)) events.push(e);
    assert.deepEqual(events.at(-2), {
      type: "tool_calls",
      calls: [{ id: "call_1", name: "f", arguments: '{"a":1}' }],
      completionTokens: 9,
    });
    assert.deepEqual(events.at(-1), { type: "finish", reason: "stop", completionTokens: 9, promptTokens: 12, cachedTokens: 8 });
  });

  test("reasoning sent apart from the content goes on as a think block, which serving splits again", async () => {
    const sse = [
      { choices: [{ delta: { reasoning_content: "Let me" } }] },
      { choices: [{ delta: { reasoning_content: " think." } }] },
      { choices: [{ delta: { content: "Hi" }, finish_reason: "stop" }] },
    ]
      .map((c) => `data: ${JSON.stringify(c)}\n\n`)
      .join("");
    const body = (async function* () {
      yield new TextEncoder().encode(`${sse}data: [DONE]\n\n`);
    })();
    let text = "";
    for await (const e of streamEvents(body, never)) if (e.type === "text") text += e.text;
    assert.equal(text, "<think>Let me think.</think>Hi");
  });

  test("a body that ends before finishing is a failure, after the text it delivered", async () => {
    const body = (async function* () {
      yield new TextEncoder().encode(`data: ${JSON.stringify({ choices: [{ delta: { content: "Hi" } }] })}\n\n`);
    })();
    const events: GenerationEvent[] = [];
    await assert.rejects(async () => {
      for await (const e of streamEvents(body, never)) events.push(e);
    }, /without finishing/);
    assert.deepEqual(events, [{ type: "text", text: "Hi", completionTokens: 1 }]);
  });
});

describe("catalog entries served by upstream engines", () => {
  const entry = (extra: Record<string, unknown>) => ({
    id: "acme/big-model",
    context_length: 32768,
    precision: "bf16",
    tags: [],
    pricing: { input: "0.1", output: "0.3", cached_input: "0.05" },
    created: 0,
    ...extra,
  });
  const backend = {
    type: "openai",
    replicas: ["http://10.0.0.5:8000/v1", "http://10.0.0.6:8000/v1"],
    api_key_env: "VLLM_KEY",
    max_concurrency: 32,
  };

  test("an entry takes a 'backend' instead of a 'source'", async () => {
    const { parseCatalog } = await import("../../src/catalog/load.js");
    const [parsed] = parseCatalog({ models: [entry({ backend })] }, "/tmp/catalog.json");
    assert.deepEqual(parsed!.backend, backend);
    assert.equal(parsed!.source, undefined);
  });

  test("exactly one of them: both, or neither, is refused with a reason", async () => {
    const { parseCatalog } = await import("../../src/catalog/load.js");
    assert.throws(
      () => parseCatalog({ models: [entry({ backend, source: "file:/x.gguf" })] }, "/tmp/c.json"),
      /exactly one of 'source'.*or 'backend'/,
    );
    assert.throws(() => parseCatalog({ models: [entry({})] }, "/tmp/c.json"), /exactly one of 'source'/);
    assert.throws(
      () => parseCatalog({ models: [entry({ backend: { ...backend, replicas: ["ftp://x"] } })] }, "/tmp/c.json"),
      /http\(s\) URL/,
    );
  });
});
