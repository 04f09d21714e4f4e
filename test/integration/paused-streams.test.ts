import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { chunkedEnd, openAiError, openSocket, readReply } from "../helpers/raw-http.js";
import { adminKey, FULL_CONTEXT, startServer, waitFor, SMOLLM2, SMOLLM2_NO_END, type RunningServer } from "../helpers/server.js";
import { health, usageTotals } from "../helpers/requests.js";

/**
 * Issue 30 item 4: a stream whose client stops reading gives its sequences back after the grace
 * period (preempted, its cells saved), resumes exactly where it stopped when its client reads, or
 * ends with a timeout error after the pause timeout, billed for what it generated. Checked through
 * /health's state and the streams' text, never against a clock.
 */

/** Waits until `paused` streams' requests are paused and none holds a sequence. */
const preempted = (server: RunningServer, paused: number) =>
  waitFor(async () => {
    const now = await health(server);
    return now.paused === paused && now.running === 0 ? now : undefined;
  }, 240_000);

/** Each step adds kilobytes to the response (20 log probabilities a token), so an unread one fills its buffers soon. */
const streamBody = (extra: Record<string, unknown>) => ({
  model: SMOLLM2,
  messages: [{ role: "user", content: "Write a very long story about a dragon." }],
  logprobs: true,
  top_logprobs: 20,
  logit_bias: SMOLLM2_NO_END,
  stream: true,
  ...extra,
});

/** Sends a streaming request on a raw socket that is not read until `drain` is called; `drain` returns the SSE text. */
async function unreadStream(
  server: RunningServer,
  key: string,
  body: Record<string, unknown>,
): Promise<{ socket: Socket; drain: () => Promise<string> }> {
  const json = JSON.stringify(body);
  const socket = await openSocket(server.url);
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
  );
  socket.pause();
  return { socket, drain: async () => dechunk((await readReply(socket, 600_000, () => socket.resume(), chunkedEnd)).body) };
}

/** The body of a chunked HTTP response. */
function dechunk(body: string): string {
  const bytes = Buffer.from(body, "utf8");
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = bytes.indexOf("\r\n", at);
    const size = parseInt(bytes.subarray(at, lineEnd).toString(), 16);
    if (!(size > 0)) return Buffer.concat(parts).toString("utf8");
    parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/** Each choice's content, in order, from a chat stream's SSE text. */
function contents(sse: string): string[] {
  const texts: string[] = [];
  for (const event of sse.split("\n\n")) {
    if (!event.startsWith("data: {") || event.includes('"error"')) continue;
    for (const choice of (JSON.parse(event.slice(6)) as { choices: Array<{ index: number; delta: { content?: string } }> }).choices) {
      texts[choice.index] = (texts[choice.index] ?? "") + (choice.delta.content ?? "");
    }
  }
  return texts;
}

describe("a paused stream gives its sequence back", () => {
  let server: RunningServer;
  let otherKey: string;
  let client: OpenAI;
  before(async () => {
    server = await startServer({
      env: {
        ...FULL_CONTEXT,
        SWITCHYARD_PARALLEL: "2",
        SWITCHYARD_STREAM_BUFFER_BYTES: "16384",
        SWITCHYARD_STREAM_PAUSE_GRACE_MS: "1000",
        // The other account's 8-token chat must be answered inside it, on a machine at a quarter of its speed.
        SWITCHYARD_STREAM_PAUSE_TIMEOUT_MS: "20000",
        // Far past the test's waits: without preemption, a paused stream would hold its sequences throughout.
        SWITCHYARD_STALL_TIMEOUT_MS: "3600000",
      },
    });
    otherKey = await adminKey(server, "another-account");
    client = new OpenAI({ baseURL: server.baseURL, apiKey: otherKey, timeout: 300_000, maxRetries: 0 });
  });
  after(() => server?.stop());

  test("unread, its choices leave every sequence; another account is served while it stays paused; it ends with a timeout error, billed for what it generated", async () => {
    const accountKey = await adminKey(server, "reader-that-stops");
    const { drain } = await unreadStream(server, accountKey, streamBody({ n: 2, temperature: 1.5, max_tokens: 3000 }));
    const paused = await preempted(server, 2);
    assert.ok(paused.preemptions >= 2, "both choices were preempted");

    const chat = await client.chat.completions.create({ model: SMOLLM2, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 });
    assert.ok(chat.usage!.completion_tokens > 0);
    const meanwhile = await health(server);
    assert.equal(meanwhile.paused, 2, "the chat was answered while the stream was still paused, before its pause timeout");

    // Past the pause timeout its generation ends: the error is written behind the unsent output.
    const totals = await waitFor(async () => {
      const t = await usageTotals(server, accountKey);
      return t.by_status.failed === 1 ? t : undefined;
    }, 240_000);
    assert.equal(totals.requests, 1);
    assert.equal((await health(server)).paused, 0);
    const text = await drain();
    const errors = [...text.matchAll(/data: (\{"error".*?\})\n\n/g)].map((m) => openAiError(m[1]!));
    assert.equal(errors.length, 1, text.slice(-600));
    assert.deepEqual([errors[0]?.type, errors[0]?.code], ["server_error", "timeout"]);
    assert.match(errors[0]!.message, /not read for 20 s/);
    assert.match(text, /data: \[DONE\]\n\n$/);
    // What it generated, every token of it: nothing after its preemption (no end-of-text token can be sampled).
    assert.equal(totals.completion_tokens, paused.engine.sampled_tokens, "billed what it generated");
    const delivered = contents(text).join("");
    assert.ok(delivered.length > 0);
  });

  test("resumed at temperature 0, its output is exactly an unpaused run's", async () => {
    // Some 130 tokens fill the buffers (the first test sees it); 400 leave the rest to generate after it resumes.
    const body = streamBody({ temperature: 0, max_tokens: 400 });
    const reference = await client.chat.completions.create({
      ...(body as object),
      stream: false,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const start = await health(server);
    const { drain } = await unreadStream(server, server.key, body);
    const paused = await preempted(server, 1);
    assert.ok(paused.preemptions > start.preemptions, "it was preempted while paused");
    // Both sequences used by another account meanwhile: the stream's cells survive only where they were saved.
    await Promise.all(
      [1, 2].map(() => client.chat.completions.create({ model: SMOLLM2, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 })),
    );
    const text = await drain();
    assert.match(text, /data: \[DONE\]\n\n$/);
    assert.equal(openAiError(text), null);
    assert.equal(contents(text)[0], reference.choices[0]!.message.content, "the resumed stream's text is the unpaused run's");
  });
});
