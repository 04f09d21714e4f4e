import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { openDatabase } from "../../src/storage/open.js";
import { GEMMA, postChat, readSse, SMOLLM2, startServer, type RunningServer } from "../helpers/server.js";

/** Gemma 3 270M's standard prices: 0.04 in, 0.02 cached in, 0.12 out per 1M tokens, in units of 1e-8 USD. */
const gemmaUnits = (u: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } }) => {
  const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
  return (u.prompt_tokens - cached) * 4 + cached * 2 + u.completion_tokens * 12;
};

describe("legacy text completions on the real base model", () => {
  let server: RunningServer;
  let client: OpenAI;
  const ids: string[] = [];
  before(async () => {
    server = await startServer({ models: [SMOLLM2, GEMMA] });
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 180_000, maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
  });

  test("Gemma 3 270M (base) continues a raw prompt through client.completions.create", async () => {
    const { data, response } = await client.completions
      .create({ model: GEMMA, prompt: "The capital of France is", max_tokens: 8, temperature: 0 })
      .withResponse();
    assert.match(data.id, /^cmpl-/);
    assert.equal(response.headers.get("x-request-id"), data.id);
    ids.push(data.id);
    assert.equal(data.object, "text_completion");
    assert.equal(data.model, GEMMA);
    assert.match(data.system_fingerprint ?? "", /^fp_/);
    assert.equal(data.choices.length, 1);
    const [choice] = data.choices;
    assert.ok(choice!.text.trim().length > 0, "the model continued the text");
    assert.ok(["stop", "length"].includes(choice!.finish_reason));
    assert.equal(choice!.logprobs, null);
    const usage = data.usage!;
    assert.ok(usage.completion_tokens >= 1 && usage.completion_tokens <= 8);
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    // Raw text, no chat template: five words and the BOS token, not a rendered turn.
    assert.ok(usage.prompt_tokens >= 5 && usage.prompt_tokens <= 8, `prompt_tokens ${usage.prompt_tokens}`);
    assert.equal((usage as unknown as { estimated_cost: number }).estimated_cost, gemmaUnits(usage) / 1e8);
  });

  test("no chat template: the raw prompt costs far fewer tokens than the same text as a chat turn", async () => {
    const raw = await client.completions.create({ model: SMOLLM2, prompt: "Hello", max_tokens: 1 });
    const chat = await (await postChat(server, { model: SMOLLM2, messages: [{ role: "user", content: "Hello" }], max_tokens: 1 })).json();
    assert.ok(raw.usage!.prompt_tokens <= 2, `raw prompt_tokens ${raw.usage!.prompt_tokens}`);
    assert.ok(chat.usage.prompt_tokens > raw.usage!.prompt_tokens + 5);
    ids.push(raw.id);
  });

  test("max_tokens defaults to 16; stop ends before the stop text", async () => {
    const story = await client.completions.create({ model: GEMMA, prompt: "Once upon a time, in a small village,", temperature: 0 });
    assert.ok(story.usage!.completion_tokens <= 16);
    const full = story.choices[0]!.text;
    const word = full.trim().split(/\s+/)[1];
    assert.ok(word, `greedy continuation has a second word: ${JSON.stringify(full)}`);
    const stopped = await client.completions.create({
      model: GEMMA,
      prompt: "Once upon a time, in a small village,",
      temperature: 0,
      stop: [word],
    });
    assert.equal(stopped.choices[0]!.finish_reason, "stop");
    assert.equal(stopped.choices[0]!.text, full.slice(0, full.indexOf(word)), "the text up to the stop string, without it");
  });

  test("a prompt array with n: each prompt gets n choices, indexed prompt × n + i; echo prepends the prompt; usage counts every prompt", async () => {
    const prompts = ["Roses are red,", "One, two, three,"];
    const singles = await Promise.all(prompts.map((prompt) => client.completions.create({ model: GEMMA, prompt, max_tokens: 1 })));
    const batch = await client.completions.create({
      model: GEMMA,
      prompt: prompts,
      n: 2,
      max_tokens: 6,
      echo: true,
      temperature: 0.8,
      seed: 7,
    });
    assert.deepEqual(
      batch.choices.map((c) => c.index),
      [0, 1, 2, 3],
    );
    batch.choices.forEach((c, i) => assert.ok(c.text.startsWith(prompts[Math.floor(i / 2)]!), `choice ${i}: ${JSON.stringify(c.text)}`));
    assert.equal(batch.usage!.prompt_tokens, singles[0]!.usage!.prompt_tokens + singles[1]!.usage!.prompt_tokens);
    assert.ok(batch.usage!.completion_tokens >= 4 && batch.usage!.completion_tokens <= 24);
  });

  test("logprobs (an integer) gives tokens, their log probabilities, that many alternatives and text offsets", async () => {
    const reply = await client.completions.create({ model: GEMMA, prompt: "The sky is", max_tokens: 5, logprobs: 3, temperature: 0 });
    const choice = reply.choices[0]!;
    const lp = choice.logprobs!;
    assert.equal(lp.tokens!.join(""), choice.text);
    assert.equal(lp.tokens!.length, reply.usage!.completion_tokens);
    assert.equal(lp.token_logprobs!.length, lp.tokens!.length);
    assert.ok(lp.token_logprobs!.every((x) => x <= 0));
    lp.top_logprobs!.forEach((top) => assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 3));
    assert.deepEqual(
      lp.text_offset,
      lp.tokens!.map((_, i) => lp.tokens!.slice(0, i).join("").length),
    );
  });

  test("a stream sends text pieces, a finish chunk and the usage, then [DONE]; greedy, it matches the whole answer", async () => {
    const request = { model: GEMMA, prompt: "Water boils at", max_tokens: 10, temperature: 0 };
    const whole = await client.completions.create(request);
    const stream = await client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let text = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    let id = "";
    for await (const chunk of stream) {
      id = chunk.id;
      assert.equal(chunk.object, "text_completion");
      text += chunk.choices[0]?.text ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    assert.equal(text, whole.choices[0]!.text);
    assert.equal(finish, whole.choices[0]!.finish_reason);
    assert.equal(usage!.completion_tokens, whole.usage!.completion_tokens);
    ids.push(id);

    const echoed = await fetch(`${server.baseURL}/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${server.key}` },
      body: JSON.stringify({ ...request, stream: true, echo: true }),
    });
    const chunks = (await readSse(echoed)).slice(0, -1).map((e) => JSON.parse(e));
    assert.equal(chunks[0].choices[0].text, request.prompt, "echo: the prompt comes first");
    assert.equal(chunks.map((c) => c.choices[0].text).join(""), request.prompt + whole.choices[0]!.text);
  });

  test("unsupported or inconsistent parameters are a 400 naming them", async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ suffix: "end." }, "suffix"],
      [{ echo: true, logprobs: 1 }, "echo"],
      [{ stream_options: { include_usage: true } }, "stream_options"],
      [{ logprobs: 6 }, "logprobs"],
      [{ best_of: 3 }, "best_of"],
      [{ prompt: [] }, "prompt"],
      [{ prompt: 42 }, "prompt"],
      [{ prompt: "word ".repeat(9000) }, "prompt"],
      [{ prompt: ["a", "b", "c", "d", "e"], n: 2 }, "prompt"],
    ];
    for (const [extra, param] of cases) {
      const error = await client.completions
        .create({ model: GEMMA, prompt: "Hi", max_tokens: 2, ...extra } as never)
        .catch((e: unknown) => e);
      assert.ok(error instanceof OpenAI.BadRequestError, JSON.stringify(extra));
      assert.equal((error.error as { param: string }).param, param);
      assert.match(error.requestID ?? "", /^cmpl-/);
    }
  });

  test("each completion leaves one ledger row, marked as the completions API", async () => {
    server.process.kill("SIGTERM");
    await new Promise((resolve) => server.process.once("exit", resolve));
    const db = await openDatabase({ dataDir: server.dataDir });
    try {
      const rows = await db.query<{ request_id: string; api: string; status: string }>(
        "SELECT request_id, api, status FROM usage_records WHERE request_id = ANY($1)",
        [ids],
      );
      assert.equal(rows.length, ids.length);
      assert.ok(rows.every((r) => r.api === "completions" && r.status === "completed"));
    } finally {
      await db.close();
    }
  });
});
