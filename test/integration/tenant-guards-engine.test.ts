import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { findPulledModel } from "../../src/catalog/pull.js";
import { loadCatalog } from "../../src/catalog/load.js";
import { resolveModelsDir } from "../../src/config/paths.js";
import { chunkedEnd, openAiError, openSocket, readReply } from "../helpers/raw-http.js";
import { adminKey, FULL_CONTEXT, readSse, startServer, waitFor, SMOLLM2, type RunningServer } from "../helpers/server.js";
import { health, usageTotals } from "../helpers/requests.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";
import { smolStandardUnits } from "../helpers/usage.js";
import { startWorker, WORKER_KEY, type RunningWorker } from "../helpers/worker.js";

/**
 * Issue 20 ("Tenants cannot hurt each other"), items 1, 10 and 16, each with the request the attack
 * sent. Nothing is timed against a clock: what is checked is state and order, so a slow machine
 * passes as a fast one does.
 */

/** The attack's request: SmolLM2's tokenizer adds no BOS, so this prompt was zero tokens. */
const EMPTY = { model: SMOLLM2, prompt: "", max_tokens: 1 };

const post = (url: string, key: string, path: string, body: unknown) =>
  fetch(`${url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(300_000),
  });

describe("item 1: a prompt of no tokens is answered, and never holds a sequence", () => {
  let server: SharedServer;
  let otherKey: string;
  before(async () => {
    server = await sharedServer({ env: FULL_CONTEXT, exclusive: true });
    otherKey = (await server.newKey("another-account")).key;
  });
  after(() => server?.stop());

  test("the attack's request is answered: the empty prompt is BOS alone, billed as one prompt token", async () => {
    const response = await post(server.url, server.key, "/v1/completions", EMPTY);
    const body = await response.json();
    assert.equal(response.status, 200, JSON.stringify(body));
    assert.equal(body.usage.prompt_tokens, 1, "BOS");
    assert.equal(body.usage.completion_tokens, 1);
    assert.equal(body.choices[0].finish_reason, "length");
    const totals = await usageTotals(server);
    assert.equal(totals.by_status.completed, 1);
    assert.equal(Math.round(totals.cost_usd * 1e8), smolStandardUnits(body.usage), "billed what the usage said");
  });

  test("eight at once end, and another account's chat is answered meanwhile", async () => {
    const empties = Array.from({ length: 8 }, () => post(server.url, server.key, "/v1/completions", EMPTY));
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: otherKey, timeout: 300_000, maxRetries: 0 });
    const chat = await client.chat.completions.create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 });
    assert.equal(chat.choices.length, 1);
    for (const response of await Promise.all(empties)) assert.equal(response.status, 200, await response.text());
    const now = await health(server);
    assert.equal(now.running + now.waiting, 0, "no sequence is left held");
  });

  test("every variant the attack tried is answered: [''], ['x',''], echo, n: 8, flex, a stream", async () => {
    const variants = [
      { ...EMPTY, prompt: [""] },
      { ...EMPTY, prompt: ["x", ""] },
      { ...EMPTY, echo: true },
      { ...EMPTY, n: 8 },
      { ...EMPTY, service_tier: "flex" },
    ];
    for (const body of variants) {
      const response = await post(server.url, server.key, "/v1/completions", body);
      const answer = await response.json();
      assert.equal(response.status, 200, `${JSON.stringify(body)}: ${JSON.stringify(answer)}`);
      const n = "n" in body ? body.n : 1;
      assert.equal(answer.choices.length, n * (Array.isArray(body.prompt) ? body.prompt.length : 1));
    }
    const events = await readSse(await post(server.url, server.key, "/v1/completions", { ...EMPTY, stream: true }));
    assert.equal(events.at(-1), "[DONE]");
    assert.equal(JSON.parse(events.at(-2)!).choices[0].finish_reason, "length");
  });
});

describe("item 1 on `serve --worker`: the engine itself repairs the empty prompt", () => {
  let worker: RunningWorker;
  before(async () => (worker = await startWorker()));
  after(() => worker?.stop());

  test("the attack's request is answered", async () => {
    const response = await post(worker.url, WORKER_KEY, "/v1/completions", EMPTY);
    const body = await response.json();
    assert.equal(response.status, 200, JSON.stringify(body));
    assert.equal(body.usage.prompt_tokens, 1);
  });
});

/**
 * A stream whose client never reads: n choices with 20 log probabilities each, so every step adds
 * kilobytes to the response. Returns the socket, which is never read until `drain` is called.
 */
async function unreadStream(server: RunningServer, key: string): Promise<{ socket: Socket; drain: () => Promise<string> }> {
  const body = JSON.stringify({
    model: SMOLLM2,
    messages: [{ role: "user", content: "Write a very long story about a dragon." }],
    max_tokens: 3000,
    n: 6,
    temperature: 1.5,
    logprobs: true,
    top_logprobs: 20,
    stream: true,
  });
  const socket = await openSocket(server.url);
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  socket.pause();
  return { socket, drain: async () => (await readReply(socket, 300_000, () => socket.resume(), chunkedEnd)).body };
}

const MAX_COMPLETION = 6 * 3000;

describe("item 10: a stream nobody reads pauses its generation, then ends", () => {
  let server: RunningServer;
  let otherKey: string;
  before(async () => {
    server = await startServer({
      env: { ...FULL_CONTEXT, SWITCHYARD_STREAM_BUFFER_BYTES: "16384", SWITCHYARD_STREAM_PAUSE_TIMEOUT_MS: "15000" },
    });
    otherKey = await adminKey(server, "another-account");
  });
  after(() => server?.stop());

  test("paused, it generates nothing while other accounts are served, and is billed what it generated", async () => {
    const { socket } = await unreadStream(server, server.key);
    await waitFor(async () => ((await health(server)).paused > 0 ? true : undefined), 240_000);
    // A step already running when the stream filled up still delivers its tokens: look once it is done.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const paused = await health(server);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const later = await health(server);
    assert.ok(later.paused > 0, "still paused");
    assert.equal(later.engine.sampled_tokens, paused.engine.sampled_tokens, "a paused request's steps are skipped");

    const client = new OpenAI({ baseURL: server.baseURL, apiKey: otherKey, timeout: 300_000, maxRetries: 0 });
    const chat = await client.chat.completions.create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 });
    assert.ok(chat.usage!.completion_tokens > 0, "another account is served while the stream is paused");

    // Past the grace period it gives its sequences back; past the pause timeout it ends with a timeout error and its row is written.
    await waitFor(async () => ((await health(server)).running === 0 ? true : undefined), 240_000);
    const totals = await waitFor(async () => {
      const t = await usageTotals(server);
      return t.by_status.failed === 1 ? t : undefined;
    }, 60_000);
    assert.equal(totals.requests, 1);
    assert.ok(totals.completion_tokens > 0 && totals.completion_tokens < MAX_COMPLETION / 4, `billed ${totals.completion_tokens} tokens`);
    // Each choice may have sampled an end of text, which is no completion token.
    assert.ok(
      totals.completion_tokens <= paused.engine.sampled_tokens && totals.completion_tokens >= paused.engine.sampled_tokens - 6,
      "billed what it generated",
    );
    socket.destroy();
  });
});

describe("item 1's stall limit: a request holding a sequence without progress is ended", () => {
  let server: RunningServer;
  before(async () => {
    // The engine's stall limit, far shorter than the stream's pause timeout and its grace period
    // (so the paused request keeps its sequence): it ends the paused request first.
    server = await startServer({
      env: {
        ...FULL_CONTEXT,
        SWITCHYARD_STALL_TIMEOUT_MS: "3000",
        SWITCHYARD_STREAM_BUFFER_BYTES: "16384",
        SWITCHYARD_STREAM_PAUSE_TIMEOUT_MS: "600000",
        SWITCHYARD_STREAM_PAUSE_GRACE_MS: "600000",
      },
    });
  });
  after(() => server?.stop());

  test("the client gets a timeout error after what was generated, and the row bills it as failed", async () => {
    const { drain } = await unreadStream(server, server.key);
    await waitFor(async () => ((await health(server)).paused > 0 ? true : undefined), 240_000);
    await waitFor(async () => ((await health(server)).running === 0 ? true : undefined), 60_000);
    const text = await drain();
    const errors = [...text.matchAll(/data: (\{"error".*?\})\n\n/g)].map((m) => openAiError(m[1]!));
    assert.equal(errors.length, 1, text.slice(-600));
    assert.equal(errors[0]?.type, "server_error");
    assert.equal(errors[0]?.code, "timeout");
    assert.match(text, /data: \[DONE\]/);
    const totals = await usageTotals(server);
    assert.equal(totals.by_status.failed, 1);
    assert.ok(totals.completion_tokens > 0 && totals.completion_tokens < MAX_COMPLETION / 4, `billed ${totals.completion_tokens} tokens`);
  });
});

/** ~600 KB of plain words: refused from its size alone (its letters need more than 8,192 of SmolLM2's tokens). */
const HUGE = "hello world ".repeat(50_000);
/** ~600 KB that no size bound refuses (3 bytes and one letter a piece, yet ~2 tokens a piece): it must be tokenized. */
const HUGE_DENSE = "a. ".repeat(200_000);

/** Six concurrent chats with `content` from the server's account, and a small chat from another account; the order they end in. */
async function sixAndOne(server: SharedServer, content: string) {
  const { key: otherKey } = await server.newKey("other");
  const finished: string[] = [];
  const huge = Array.from({ length: 6 }, async () => {
    const response = await post(server.url, server.key, "/v1/chat/completions", { model: SMOLLM2, messages: [{ role: "user", content }] });
    const error = openAiError(await response.text());
    finished.push("huge");
    return { status: response.status, code: error?.code, atLeast: error?.message.includes("at least") };
  });
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: otherKey, timeout: 300_000, maxRetries: 0 });
  const chat = client.chat.completions.create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }).then((c) => {
    finished.push("chat");
    return c;
  });
  return { refusals: await Promise.all(huge), chat: await chat, finished };
}

describe("item 16: the prompt workers are shared fairly between accounts", () => {
  test("another key's prompt runs beside one key's six huge ones, not behind them", async () => {
    const entry = (await loadCatalog()).find((e) => e.id === SMOLLM2)!;
    const pulled = await findPulledModel(entry, resolveModelsDir());
    assert.ok(pulled, "SmolLM2 is pulled (npm test pulls it first)");
    // The built engine: its prompt workers are compiled files (a worker thread does not load TypeScript).
    const built = new URL("../../dist/engine/model-host.js", import.meta.url).href;
    const { loadModelHost } = (await import(built)) as typeof import("../../src/engine/model-host.js");
    const host = await loadModelHost({
      modelPath: pulled.path,
      sequences: 1,
      contextWindow: 2048,
      threads: 1,
      shards: 1,
      maxWaiting: 1,
      flexMaxWaitMs: 1000,
      prefixCache: false,
      stallTimeoutMs: 60_000,
    });
    try {
      const order: string[] = [];
      const jobs = Array.from({ length: 6 }, (_, i) => host.tokenizeText(HUGE, { fairnessKey: "a" }).then(() => order.push(`a${i}`)));
      // 20 KB: large enough for a prompt worker, far smaller than a's.
      jobs.push(host.tokenizeText("hello there ".repeat(1_700), { fairnessKey: "b" }).then(() => order.push("b")));
      await Promise.all(jobs);
      assert.ok(order.indexOf("b") <= 1, `b finished after ${order.indexOf("b")} of a's prompts: ${order.join(" ")}`);
    } finally {
      await host.close();
    }
  });

  describe("over HTTP", () => {
    let server: SharedServer;
    before(async () => (server = await sharedServer({ env: FULL_CONTEXT, exclusive: true })));
    after(() => server?.stop());

    test("six concurrent 600 KB prompts of words are refused from their size, before any is tokenized", async () => {
      const { refusals, chat } = await sixAndOne(server, HUGE);
      for (const refusal of refusals) assert.deepEqual(refusal, { status: 400, code: "context_length_exceeded", atLeast: true });
      assert.equal(chat.choices.length, 1);
    });

    test("six that must be tokenized do not hold back another account's chat: it is answered before they are all refused", async () => {
      const { refusals, finished } = await sixAndOne(server, HUGE_DENSE);
      for (const refusal of refusals) assert.deepEqual(refusal, { status: 400, code: "context_length_exceeded", atLeast: false });
      assert.ok(finished.indexOf("chat") < 6, `the chat was answered after all ${finished.indexOf("chat")} refusals`);
    });
  });
});
