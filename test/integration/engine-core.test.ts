import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  adminKey,
  FULL_CONTEXT,
  postChat,
  readSseTimed,
  startServer,
  waitFor,
  SMOLLM2_NO_END,
  type RunningServer,
} from "../helpers/server.js";
import { ask, health } from "../helpers/requests.js";

// The step loop on the real model: tiers inside a step, `n` sharing one prefill, admission by
// free sequences. Assertions count steps and tokens, never time.

/**
 * A standard stream of 2,000 tokens (end-of-text banned: none ends before the test stops it, however
 * slow the machine) that counts its chunks; `stop()` hangs up.
 */
async function stream(server: RunningServer, key: string, content: string) {
  const controller = new AbortController();
  const response = await postChat(server, ask(content, { stream: true, max_tokens: 2000, temperature: 0, logit_bias: SMOLLM2_NO_END }), {
    key,
    signal: controller.signal,
  });
  assert.equal(response.status, 200);
  let chunks = 0;
  const done = readSseTimed(response, () => chunks++).then(
    (events) => events,
    (error: unknown) => (controller.signal.aborted ? [] : Promise.reject(error)),
  );
  return {
    chunks: () => chunks,
    done,
    stop: () => controller.abort(),
  };
}

describe("the engine's step loop on the real model", () => {
  let server: RunningServer;
  before(async () => {
    // Without speculation a stream gets at most one chunk a step, so chunks count steps; with it
    // one step can deliver several accepted draft tokens to a stream (speculation.test.ts covers it).
    server = await startServer({ env: { ...FULL_CONTEXT, SWITCHYARD_PARALLEL: "16", SWITCHYARD_SPECULATION: "off" } });
  });
  after(async () => {
    await server?.stop();
  });

  test("n choices compute their prompt once: the siblings copy its cells", async () => {
    const key = await adminKey(server, "n-choices"); // nothing of this prompt is cached yet
    const prompt = `Summarise in one line: ${"the river runs past the mill and the town. ".repeat(20)}`;
    const before = (await health(server)).engine.prompt_tokens_computed;
    const response = await postChat(server, ask(prompt, { n: 4, max_tokens: 4, seed: 7 }), { key });
    assert.equal(response.status, 200);
    const body = (await response.json()) as {
      choices: unknown[];
      usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
    };
    assert.equal(body.choices.length, 4);
    const promptTokens = body.usage.prompt_tokens;
    assert.ok(promptTokens > 150, `a long prompt (${promptTokens} tokens)`);
    const computed = (await health(server)).engine.prompt_tokens_computed - before;
    // Once all but the last token, then the last token once per choice (its logits feed each choice's first sample).
    assert.equal(computed, promptTokens - 1 + 4, `prompt tokens evaluated: ${computed} for a ${promptTokens}-token prompt and 4 choices`);
  });

  test("a priority request arriving while 16 streams run gets its first token within a few steps, and the stream it displaced resumes", async () => {
    const key = await adminKey(server, "streams");
    const streams = await Promise.all(
      Array.from({ length: 16 }, (_, i) => stream(server, key, `Tell story number ${i} about a lighthouse keeper.`)),
    );
    try {
      await waitFor(
        async () => ((await health(server)).running === 16 && streams.every((s) => s.chunks() > 1) ? true : undefined),
        120_000,
      );
      const chunksBefore = streams.map((s) => s.chunks());
      const priority = await postChat(server, ask("Say hello.", { stream: true, max_tokens: 5, service_tier: "priority" }), { key });
      assert.equal(priority.status, 200);
      // The first chunk (the role) goes out once the engine admitted the request; then count the
      // chunks the running streams get until its first token: each stream gets at most one a step.
      let admittedAt: number[] | undefined;
      let firstTokenAt: number[] | undefined;
      const events = await readSseTimed(priority, (event) => {
        admittedAt ??= streams.map((s) => s.chunks());
        if (firstTokenAt || event.data === "[DONE]" || !JSON.parse(event.data).choices[0]?.delta?.content) return;
        firstTokenAt = streams.map((s) => s.chunks());
      });
      assert.ok(events.length > 2 && admittedAt && firstTokenAt);
      const steps = Math.max(...firstTokenAt.map((n, i) => n - admittedAt![i]!));
      const sinceSent = Math.max(...firstTokenAt.map((n, i) => n - chunksBefore[i]!));
      // One step admits it, computes its prompt and samples; the slack covers chunks read late.
      assert.ok(steps <= 8, `the streams got up to ${steps} chunks between the priority request's admission and its first token`);
      assert.ok(sinceSent <= 40, `and ${sinceSent} from its arrival (HTTP, auth and the budget's reservation included)`);
      assert.ok((await health(server)).preemptions >= 1, "a standard stream gave way");
      // Every stream, the displaced one included, goes on: the preemption was only a pause.
      await waitFor(async () => (streams.every((s, i) => s.chunks() > firstTokenAt![i]! + 2) ? true : undefined), 120_000);
    } finally {
      for (const s of streams) s.stop();
      await Promise.all(streams.map((s) => s.done));
    }
    await waitFor(async () => ((await health(server)).running === 0 ? true : undefined), 60_000);
  });

  test("admission waits for a free sequence rather than overcommitting cells; all complete", async () => {
    const key = await adminKey(server, "admission");
    const streams = await Promise.all(Array.from({ length: 16 }, (_, i) => stream(server, key, `Describe a city, number ${i}.`)));
    await waitFor(async () => ((await health(server)).running === 16 ? true : undefined), 120_000);
    const extra = Array.from({ length: 3 }, () => postChat(server, ask("Say hi.", { max_tokens: 3 }), { key }));
    const waiting = await waitFor(async () => ((h) => (h.waiting === 3 ? h : undefined))(await health(server)), 60_000);
    assert.equal(waiting.running, 16, "no more than one request per sequence");
    for (const s of streams.slice(0, 3)) s.stop();
    const answers = await Promise.all(extra);
    assert.deepEqual(
      answers.map((r) => r.status),
      [200, 200, 200],
    );
    for (const s of streams.slice(3)) s.stop();
    await Promise.all(streams.map((s) => s.done));
  });
});
