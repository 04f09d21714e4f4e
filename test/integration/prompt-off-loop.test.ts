import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { openAiError } from "../helpers/raw-http.js";
import { FULL_CONTEXT, postChat, SMOLLM2, type ServerAddress } from "../helpers/server.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";

/**
 * Issue 11, defect 1: one request froze the whole server while its prompt was rendered and
 * tokenized on the event loop, in time that grew with the square of its special tokens. A prompt
 * that cannot fit is now refused from its size alone, and one that must be rendered is rendered
 * on a worker thread while the server goes on answering.
 *
 * Nothing here is timed against a clock: what is checked is the order of answers, so a slow
 * machine passes as a fast one does.
 */

/** SmolLM2's longest token: a newline and 80 spaces, 81 bytes. */
const LONG_TOKEN = `\n${" ".repeat(80)}`;
/** ~600 KB that tokenize into 7,500 tokens (the window is 8,192): it fits, and takes a while to tokenize. */
const BIG_FITTING = `x${LONG_TOKEN.repeat(7_500)}x`;

interface Watch {
  /** performance.now() of each /health answer. */
  answers: number[];
  stop(): Promise<void>;
}

/** Asks /health again as soon as it answers, until stopped. */
function watchHealth(server: Pick<ServerAddress, "url">): Watch {
  const answers: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const response = await fetch(`${server.url}/health`, { signal: AbortSignal.timeout(300_000) });
      assert.equal(response.status, 200);
      await response.arrayBuffer();
      answers.push(performance.now());
    }
  })();
  return {
    answers,
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** The longest time between the request going out and its answer during which /health answered nothing. */
function longestSilence(answers: readonly number[], from: number, to: number): number {
  const times = [from, ...answers.filter((t) => t > from && t < to), to];
  return Math.max(...times.slice(1).map((t, i) => t - times[i]!));
}

async function expectContextExceeded(response: Response, param: string) {
  const text = await response.text();
  assert.equal(response.status, 400, text.slice(0, 300));
  const error = openAiError(text);
  assert.equal(error?.code, "context_length_exceeded", text.slice(0, 300));
  assert.equal(error?.param, param);
  // "at least": found from the prompt's size, before it was rendered.
  assert.match(error!.message, /at least \d+ tokens/);
}

describe("a large prompt never stalls the server (issue 11)", () => {
  let server: SharedServer;
  before(async () => {
    server = await sharedServer({ env: FULL_CONTEXT, exclusive: true });
  });
  after(async () => {
    await server?.stop();
  });

  test("what cannot fit is refused from its size alone: 20,000 messages, one 3.9 MB message, a 3.9 MB raw prompt", async () => {
    const watch = watchHealth(server);
    const manyMessages = Array.from({ length: 20_000 }, () => ({ role: "user", content: "a" }));
    const huge = "hello world ".repeat(325_000);
    await expectContextExceeded(await postChat(server, { model: SMOLLM2, messages: manyMessages, max_tokens: 2 }), "messages");
    await expectContextExceeded(
      await postChat(server, { model: SMOLLM2, messages: [{ role: "user", content: huge }], max_tokens: 2 }),
      "messages",
    );
    const completions = await fetch(`${server.baseURL}/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${server.key}` },
      body: JSON.stringify({ model: SMOLLM2, prompt: huge, max_tokens: 2 }),
    });
    await expectContextExceeded(completions, "prompt");
    await watch.stop();
    assert.ok(watch.answers.length > 0, "/health answered while they were refused");
  });

  for (const api of ["chat", "completions"] as const) {
    test(`a ${api} prompt that fits but takes long to tokenize leaves /health and a small request answering`, async () => {
      const watch = watchHealth(server);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const abort = new AbortController();
      const sent = performance.now();
      const big =
        api === "chat"
          ? postChat(
              server,
              { model: SMOLLM2, messages: [{ role: "user", content: BIG_FITTING }], max_tokens: 1, stream: true },
              { signal: abort.signal },
            )
          : fetch(`${server.baseURL}/completions`, {
              method: "POST",
              headers: { "content-type": "application/json", authorization: `Bearer ${server.key}` },
              body: JSON.stringify({ model: SMOLLM2, prompt: BIG_FITTING, max_tokens: 1, stream: true }),
              signal: abort.signal,
            });
      // A small prompt that is rendered and tokenized too, then refused without reaching the
      // decoder (its max_tokens leave no room), so its answer waits on nothing but the prompt path.
      let smallDone = Infinity;
      const small = postChat(server, { model: SMOLLM2, messages: [{ role: "user", content: "hi" }], max_tokens: 8190 }).then(
        async (response) => {
          const text = await response.text();
          assert.equal(response.status, 400, text);
          assert.equal(openAiError(text)?.code, "context_length_exceeded");
          assert.doesNotMatch(text, /at least/, "refused after tokenizing, not from its size");
          smallDone = performance.now();
        },
      );
      const response = await big;
      const answered = performance.now();
      // Admitted (its stream started): the whole prompt was rendered and tokenized, and fit.
      assert.equal(response.status, 200, response.status === 200 ? "" : await response.text());
      abort.abort();
      await small;
      await watch.stop();

      const silence = longestSilence(watch.answers, sent, answered);
      assert.ok(
        silence < (answered - sent) / 2,
        `/health was silent for ${silence.toFixed(0)} of the ${(answered - sent).toFixed(0)} ms the big prompt took`,
      );
      assert.ok(
        smallDone < answered,
        `the small request (${(smallDone - sent).toFixed(0)} ms) answered before the big one (${(answered - sent).toFixed(0)} ms)`,
      );
    });
  }
});
