import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { cli, postChat, readSse, SMOLLM2, FULL_CONTEXT, type ServerAddress } from "../helpers/server.js";
import { ask } from "../helpers/requests.js";
import { sharedServer, type SharedServer } from "../helpers/shared-server.js";
import { smolStandardUnits } from "../helpers/usage.js";

const SPECIAL_TOKEN_TEXT = /<\|im_end\|>|<\|im_start\|>|<\|endoftext\|>|<\/s>|<end_of_turn>|<start_of_turn>/;

describe("chat completions against the real SmolLM2 model", () => {
  let server: SharedServer;
  before(async () => {
    server = await sharedServer({ env: FULL_CONTEXT, exclusive: true });
  });
  after(async () => {
    await server?.stop();
  });

  test("a non-streamed answer has every field of the spec, with the right types", async () => {
    const before = Math.floor(Date.now() / 1000);
    const response = await postChat(server, ask("Name three colours.", { max_tokens: 40 }));
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /application\/json/);
    const raw = await response.text();
    const body = JSON.parse(raw);
    assert.match(body.id, /^chatcmpl-[A-Za-z0-9_-]{16,}$/);
    assert.equal(body.object, "chat.completion");
    assert.ok(Number.isInteger(body.created) && body.created >= before && body.created <= before + 120);
    assert.equal(body.model, SMOLLM2);
    assert.equal(body.choices.length, 1);
    const [choice] = body.choices;
    assert.equal(choice.index, 0);
    assert.equal(choice.message.role, "assistant");
    assert.equal(typeof choice.message.content, "string");
    assert.ok(choice.message.content.trim().length > 0, "the model generated text");
    assert.doesNotMatch(choice.message.content, SPECIAL_TOKEN_TEXT);
    assert.ok(["stop", "length"].includes(choice.finish_reason));
    const usage = body.usage;
    assert.ok(usage.prompt_tokens > 5);
    assert.ok(usage.completion_tokens >= 1 && usage.completion_tokens <= 40);
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    assert.equal(typeof usage.estimated_cost, "number");
    // The catalog's standard prices for SmolLM2 are 0.02 in / 0.06 out per 1M tokens; the JSON text is the exact decimal.
    const expected = smolStandardUnits(usage) / 1e8;
    assert.ok(Math.abs(usage.estimated_cost - expected) < 1e-15);
    const costText = /"estimated_cost":([0-9.]+)/.exec(raw)![1]!;
    assert.doesNotMatch(costText, /e/i);
    assert.equal(costText, exactCost(usage.prompt_tokens, usage.completion_tokens));
  });

  test("a stream is content chunks with the role, one id, a final empty delta, then [DONE]", async () => {
    const response = await postChat(server, ask("Name three colours.", { stream: true, max_tokens: 30 }));
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /text\/event-stream/);
    const events = await readSse(response);
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    assert.ok(chunks.length >= 3);
    const ids = new Set(chunks.map((c) => c.id));
    assert.equal(ids.size, 1);
    assert.match([...ids][0], /^chatcmpl-/);
    for (const chunk of chunks) {
      assert.equal(chunk.object, "chat.completion.chunk");
      assert.equal(chunk.model, SMOLLM2);
      assert.ok(Number.isInteger(chunk.created));
      assert.equal(chunk.choices.length, 1);
      assert.equal(chunk.choices[0].index, 0);
    }
    const last = chunks.at(-1);
    assert.deepEqual(last.choices[0].delta, {});
    assert.ok(["stop", "length"].includes(last.choices[0].finish_reason));
    const content = chunks.slice(0, -1);
    for (const chunk of content) {
      assert.equal(chunk.choices[0].delta.role, "assistant");
      assert.equal(typeof chunk.choices[0].delta.content, "string");
      assert.equal(chunk.choices[0].finish_reason, null);
    }
    const text = content.map((c) => c.choices[0].delta.content).join("");
    assert.ok(text.trim().length > 0);
    assert.doesNotMatch(text, SPECIAL_TOKEN_TEXT);
  });

  test("stream_options.include_usage adds a usage chunk with no choices before [DONE]", async () => {
    const events = await readSse(
      await postChat(server, ask("Say hi.", { stream: true, max_tokens: 10, stream_options: { include_usage: true } })),
    );
    assert.equal(events.at(-1), "[DONE]");
    const usageChunk = JSON.parse(events.at(-2)!);
    assert.deepEqual(usageChunk.choices, []);
    assert.equal(usageChunk.usage.total_tokens, usageChunk.usage.prompt_tokens + usageChunk.usage.completion_tokens);
    assert.equal(typeof usageChunk.usage.estimated_cost, "number");
    const streamedText = events
      .slice(0, -3)
      .map((e) => JSON.parse(e).choices[0].delta.content)
      .join("");
    assert.ok(usageChunk.usage.completion_tokens >= 1 && streamedText.length > 0);
  });

  test("the official openai client works in both modes, with a multi-turn conversation", async () => {
    const client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL });
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "system", content: "You are a terse assistant." },
      { role: "user", content: "What is the capital of France?" },
    ];
    const first = await client.chat.completions.create({ model: SMOLLM2, messages, max_tokens: 30, temperature: 0 });
    const reply = first.choices[0]!.message.content ?? "";
    assert.ok(reply.length > 0);
    assert.match(reply, /Paris/i, "SmolLM2 knows the capital of France");
    messages.push({ role: "assistant", content: reply }, { role: "user", content: "And of Italy?" });
    const stream = await client.chat.completions.create({ model: SMOLLM2, messages, max_tokens: 30, temperature: 0, stream: true });
    let second = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      second += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.match(second, /Rome/i, "the second turn sees the whole history");
    assert.ok(finish === "stop" || finish === "length");
    const models = await client.models.list();
    assert.ok(models.data.some((m) => m.id === SMOLLM2));
  });

  test("max_tokens ends with finish_reason length and exactly that many tokens", async () => {
    const body = await (await postChat(server, ask("Write a long story about a dragon.", { max_tokens: 7, temperature: 0 }))).json();
    assert.equal(body.choices[0].finish_reason, "length");
    assert.equal(body.usage.completion_tokens, 7);
  });

  test("a stop string cuts the output exactly and is never sent", async () => {
    const base = await (await postChat(server, ask("Count from 1 to 20 separated by commas.", { max_tokens: 60, temperature: 0 }))).json();
    const full: string = base.choices[0].message.content;
    const stop = full.includes("5") ? "5" : full.slice(4, 6);
    const cut = await (
      await postChat(server, ask("Count from 1 to 20 separated by commas.", { max_tokens: 60, temperature: 0, stop: [stop, "zzzz"] }))
    ).json();
    assert.equal(cut.choices[0].finish_reason, "stop");
    assert.equal(cut.choices[0].message.content, full.slice(0, full.indexOf(stop)));
    const streamed = await readSse(
      await postChat(server, ask("Count from 1 to 20 separated by commas.", { max_tokens: 60, temperature: 0, stop, stream: true })),
    );
    const text = streamed
      .slice(0, -1)
      .map((e) => JSON.parse(e).choices[0].delta.content ?? "")
      .join("");
    assert.equal(text, full.slice(0, full.indexOf(stop)));
  });

  test("the same seed gives the same sampled output", async () => {
    const body = ask("Invent a name for a cat.", { max_tokens: 20, temperature: 1.0, seed: 1234 });
    const a = await (await postChat(server, body)).json();
    const b = await (await postChat(server, body)).json();
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  });

  test("8 concurrent requests all complete and run at the same time", async () => {
    const spans = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const start = performance.now();
        const response = await postChat(
          server,
          ask(`Tell me a fact about the number ${i}.`, { max_tokens: 24, temperature: 0.5, seed: i, stream: true }),
        );
        const events = await readSse(response);
        const firstTokenAt = start; // request issued
        assert.equal(events.at(-1), "[DONE]");
        return { start: firstTokenAt, end: performance.now() };
      }),
    );
    // Every pair overlaps: each request began before every other one ended.
    const latestStart = Math.max(...spans.map((s) => s.start));
    const earliestEnd = Math.min(...spans.map((s) => s.end));
    assert.ok(latestStart < earliestEnd, "all 8 requests were in flight together");
    const health = await (await fetch(`${server.url}/health`)).json();
    const model = health.models.find((m: { id: string }) => m.id === SMOLLM2);
    assert.equal(model.running, 0);
    assert.equal(model.waiting, 0);
  });

  test("a client that disconnects mid-stream frees its sequence at once", async () => {
    const controllers = Array.from({ length: 8 }, () => new AbortController());
    await Promise.all(
      controllers.map(async (controller) => {
        const response = await fetch(`${server.baseURL}/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
          body: JSON.stringify(ask("Write a very long essay about the sea.", { stream: true, max_tokens: 2000 })),
          signal: controller.signal,
        });
        const reader = response.body!.getReader();
        await reader.read(); // at least one chunk arrived: generation is under way
        controller.abort();
      }),
    );
    const freed = await pollHealth(server, (m) => m.running === 0);
    assert.equal(freed.running, 0, "every aborted generation released its sequence");
    // Full concurrency is still there: 8 new requests all run together.
    const inFlight = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const response = await postChat(server, ask("Say something.", { stream: true, max_tokens: 16 }));
        const reader = response.body!.getReader();
        await reader.read();
        return reader;
      }),
    );
    const busy = await (await fetch(`${server.url}/health`)).json();
    assert.equal(busy.models[0].waiting, 0, "no request had to queue behind a leaked sequence");
    await Promise.all(inFlight.map((r) => r.cancel()));
  });
});

describe("authentication", () => {
  let server: SharedServer;
  before(async () => {
    server = await sharedServer();
  });
  after(async () => {
    await server?.stop();
  });

  const expect401 = async (response: Response) => {
    assert.equal(response.status, 401);
    const body = await response.json();
    assert.equal(body.error.type, "authentication_error");
    assert.equal(typeof body.error.message, "string");
    assert.ok("param" in body.error && "code" in body.error);
  };

  test("a missing Authorization header is refused", async () => {
    await expect401(await postChat(server, ask("hi"), { key: null }));
  });
  test("a malformed Authorization header is refused", async () => {
    await expect401(await postChat(server, ask("hi"), { key: null, headers: { authorization: server.key } }));
    await expect401(await postChat(server, ask("hi"), { key: null, headers: { authorization: "Basic abc" } }));
  });
  test("an unknown key is refused", async () => {
    await expect401(await postChat(server, ask("hi"), { key: "sk-sy-not-a-real-key" }));
  });
  test("a revoked key is refused at once, revoked through the CLI while the server runs", async () => {
    const listed = JSON.parse(cli(["keys", "list", "--json", "--data-dir", server.dataDir])) as Array<{ id: string; account: string }>;
    const id = listed.find((k) => k.account === server.account)!.id;
    const ok = await fetch(`${server.baseURL}/models`, { headers: { authorization: `Bearer ${server.key}` } });
    assert.equal(ok.status, 200);
    cli(["keys", "revoke", id, "--data-dir", server.dataDir]);
    await expect401(await postChat(server, ask("hi")));
  });
  test("the models list needs a key too; /health does not", async () => {
    await expect401(await fetch(`${server.baseURL}/models`));
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  });
});

async function pollHealth(server: Pick<ServerAddress, "url">, done: (m: { running: number; waiting: number }) => boolean) {
  // Each generation notices its abort at its next decode step; allow for a slow, shared machine.
  for (let i = 0; i < 300; i++) {
    const health = await (await fetch(`${server.url}/health`)).json();
    if (done(health.models[0])) return health.models[0];
    await new Promise((r) => setTimeout(r, 100));
  }
  return (await (await fetch(`${server.url}/health`)).json()).models[0];
}

/** prompt x 0.02 + completion x 0.06 per 1M tokens, as exact decimal text. */
function exactCost(prompt: number, completion: number): string {
  const units = BigInt(prompt) * 2n + BigInt(completion) * 6n; // in 1e-8 dollars
  const digits = units.toString().padStart(9, "0");
  const text = `${digits.slice(0, -8)}.${digits.slice(-8)}`.replace(/0+$/, "").replace(/\.$/, "");
  return text;
}
