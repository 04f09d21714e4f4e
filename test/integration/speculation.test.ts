import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { findPulledModel } from "../../src/catalog/pull.js";
import { loadCatalog } from "../../src/catalog/load.js";
import { resolveModelsDir } from "../../src/config/paths.js";
import { startServer, SMOLLM2, type RunningServer } from "../helpers/server.js";

// Speculative decoding changes the speed of an answer, never the answer. One server runs with
// SWITCHYARD_SPECULATION=off, then one with auto (the default), on both chat models; every
// request gets the same output from both, token for token at temperature 0 (with a grammar too,
// and with a prediction that is right, edited, or wrong), and the same distribution when sampled.
//
// "The same" up to floating-point ties: llama.cpp's CPU kernels are not batch-invariant for some
// weight types (Qwen2.5-Coder's Q4_K tensors take a 4-row gemm or a 1-row gemv; its Q5_0 and Q8_0
// ones tinyBLAS for 2 rows or more, ggml's vec_dot for one), so a token's logits differ in the
// last bits between a step that computes it alone and one that computes it with others: with
// drafts after it, or beside another request (speculation off: a lone Qwen request and the same
// request beside three others already part ways at a near-tie). Where the outputs differ, the
// first differing token must be such a tie: within TIE nats of the one chosen without speculation.
// (On this VM every SmolLM2 answer and most Qwen ones come back identical; the diagnostic says how many.)

const QWEN = "Qwen/Qwen2.5-Coder-0.5B-Instruct";
const MODELS = [SMOLLM2, QWEN];

const PASSAGE = [
  "The lighthouse stood on the northern cape for two hundred years.",
  "Each evening the keeper climbed ninety steps to light the lamp,",
  "and each morning he wrote the weather in a book bound in green cloth.",
  "Ships passed in the night and never knew his name.",
].join("\n");

const weather = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const person = {
  type: "object",
  properties: { name: { type: "string" }, age: { type: "integer" }, hobbies: { type: "array", items: { type: "string" } } },
  required: ["name", "age", "hobbies"],
};

type Body = Omit<OpenAI.ChatCompletionCreateParamsNonStreaming, "model"> & { prediction?: { type: "content"; content: string } };

/**
 * The requests whose outputs must agree. Each runs on the off server as is; on the auto server as
 * is, and again with each prediction, made from the off server's answer: the answer itself, an edit
 * of it, or text that has nothing to do with it.
 */
const CASES: Array<{ name: string; body: Body; predictions: Array<(answer: string) => string> }> = [
  {
    name: "copy",
    body: { messages: [{ role: "user", content: `Copy this text exactly:\n\n${PASSAGE}` }], max_tokens: 120 },
    predictions: [(answer) => answer, (answer) => answer.replace(/\b(\w{5,})\b/, "$1 indeed").replace(/night/, "fog")],
  },
  {
    name: "story",
    body: { messages: [{ role: "user", content: "Tell a very short story about a cat." }], max_tokens: 60 },
    predictions: [() => PASSAGE],
  },
  {
    name: "json_schema",
    body: {
      messages: [{ role: "user", content: "Describe a fictional person as JSON." }],
      max_tokens: 80,
      response_format: { type: "json_schema", json_schema: { name: "person", schema: person } },
    },
    predictions: [(answer) => answer.replace(/"name"\s*:\s*"[^"]*"/, '"name": "Alex"')],
  },
  {
    name: "tools",
    body: {
      messages: [{ role: "user", content: "What is the weather in Paris?" }],
      max_tokens: 60,
      tools: [weather],
      tool_choice: "required",
    },
    predictions: [],
  },
];

/**
 * The cases each model runs. Qwen2.5-Coder (four times SmolLM2's cost a token) runs the copy, where
 * drafts and predictions are accepted most, and the grammar-bound tool call; SmolLM2 runs them all.
 */
const casesOf = (model: string) => (model === QWEN ? CASES.filter((c) => c.name === "copy" || c.name === "tools") : CASES);

/**
 * Log probabilities this close count as a tie that a batch's arithmetic may break either way. Not
 * only the last bits: activations are quantized to 8-bit blocks before each matmul, so a last-bit
 * difference can move a value across a rounding step, and the differences add up over the
 * positions before (a gap of 0.21 nats was seen at a first difference on Qwen2.5-Coder).
 */
const TIE = 0.3;

/**
 * The answers agree: identical, or apart from a first differing token that is a tie in the
 * expected answer's log probabilities. Returns whether they were identical.
 */
function agreeUpToTies(actual: OpenAI.ChatCompletion, expected: OpenAI.ChatCompletion, label: string): boolean {
  if (JSON.stringify(outcome(actual)) === JSON.stringify(outcome(expected))) return true;
  const want = expected.choices[0]!.logprobs?.content ?? [];
  const got = actual.choices[0]!.logprobs?.content ?? [];
  const at = want.findIndex((token, i) => got[i]?.token !== token.token);
  assert.ok(
    at >= 0 && got[at],
    `${label}: the outputs differ, but not in their tokens:\n${JSON.stringify(outcome(actual))}\n${JSON.stringify(outcome(expected))}`,
  );
  const alternative = want[at]!.top_logprobs.find((t) => t.token === got[at]!.token);
  assert.ok(
    alternative && want[at]!.logprob - alternative.logprob <= TIE,
    `${label}: token ${at} is ${JSON.stringify(got[at]!.token)} instead of ${JSON.stringify(want[at]!.token)}, which was not a tie (${JSON.stringify(want[at]!.top_logprobs)})`,
  );
  return false;
}

/** What an answer is made of, for comparison: text, tool calls, finish reason. */
function outcome(reply: OpenAI.ChatCompletion) {
  const choice = reply.choices[0]!;
  return {
    content: choice.message.content,
    tool_calls: choice.message.tool_calls?.map((c) => (c.type === "function" ? c.function : c)),
    finish_reason: choice.finish_reason,
  };
}

async function speculation(server: RunningServer): Promise<{ draft: number; accepted: number }> {
  const body = (await (await fetch(`${server.url}/health`)).json()) as {
    models: Array<{ engine?: { shards?: Array<{ speculation: { draft_tokens: number; accepted_tokens: number } }> } }>;
  };
  const shards = body.models.flatMap((m) => m.engine?.shards ?? []);
  return {
    draft: shards.reduce((n, s) => n + s.speculation.draft_tokens, 0),
    accepted: shards.reduce((n, s) => n + s.speculation.accepted_tokens, 0),
  };
}

// 240 seeded draws a mode: the per-seed check (at most 4 of 240 apart) is the strong one; the
// chi-square test catches a shifted distribution (400 draws cost CI two more minutes).
const DRAW_GROUPS = 240;
const DRAW_CHOICES = 1;

/**
 * Seeded draws of a sampled continuation (temperature 1) on the engine itself: the real model, no
 * HTTP (hundreds of draws through the API take minutes on a busy machine). Two requests at a
 * time, one a shard (a group of choices runs on one shard, and 8 streams decoding on a shard
 * leave drafts little room: 6 draft tokens in 400 draws), 6 tokens each, with a prediction of what
 * is likely. Returns each seed's continuation and the draft tokens verified and accepted.
 */
async function draws(mode: "auto" | "off"): Promise<{ texts: string[]; drafted: number; accepted: number }> {
  const entry = (await loadCatalog()).find((e) => e.id === SMOLLM2)!;
  const pulled = await findPulledModel(entry, resolveModelsDir());
  assert.ok(pulled, "SmolLM2 is pulled (npm test pulls it first)");
  // The built engine: its workers are compiled files (a worker thread does not load TypeScript).
  const built = new URL("../../dist/engine/model-host.js", import.meta.url).href;
  const { loadModelHost } = (await import(built)) as typeof import("../../src/engine/model-host.js");
  const host = await loadModelHost({
    modelPath: pulled.path,
    sequences: 16,
    contextWindow: 256,
    // As every test server runs (TEST_ENGINE): two shards of one thread.
    threads: 1,
    shards: 2,
    maxWaiting: 64,
    flexMaxWaitMs: 60_000,
    prefixCache: true,
    stallTimeoutMs: 120_000,
    speculation: mode,
  });
  try {
    const { tokens } = await host.tokenizeChat([{ role: "user", content: "Repeat exactly: The quick brown fox jumps over the lazy dog." }]);
    const prediction = await host.tokenizePrediction("The quick brown fox jumps over the lazy dog.");
    const texts: string[] = [];
    const counts = { drafted: 0, accepted: 0 };
    // A fresh engine prices a draft token at its prior (a decode token's cost), and at 8 streams a
    // shard then drafts nothing; a lone request first lets it measure what drafts cost on this
    // machine, as a serving engine does with its first requests.
    const warmUp = host.generate([
      {
        promptTokens: tokens,
        maxTokens: 48,
        sampling: { temperature: 0, topP: 1 },
        stop: [],
        prediction: [...prediction, ...prediction, ...prediction, ...prediction],
        cacheNamespace: "warm-up",
      },
    ])[0]!;
    for await (const _event of warmUp);
    const group = async (g: number) => {
      const choices = Array.from({ length: DRAW_CHOICES }, (_, i) => ({
        promptTokens: tokens,
        maxTokens: 6,
        sampling: { temperature: 1, topP: 1, seed: g * DRAW_CHOICES + i },
        stop: [],
        prediction,
        cacheNamespace: "draws",
      }));
      await Promise.all(
        host.generate(choices).map(async (events, i) => {
          let text = "";
          for await (const event of events) {
            if (event.type === "text") text += event.text;
            if (event.type === "finish")
              [counts.drafted, counts.accepted] = [
                counts.drafted + (event.speculation?.draftTokens ?? 0),
                counts.accepted + (event.speculation?.acceptedTokens ?? 0),
              ];
          }
          texts[g * DRAW_CHOICES + i] = text;
        }),
      );
    };
    for (let g = 0; g < DRAW_GROUPS; g += 2) await Promise.all([group(g), group(g + 1)]);
    return { texts, ...counts };
  } finally {
    await host.close();
  }
}

/** Pearson's chi-square test of homogeneity on two samples' category counts; returns the p-value. */
function chiSquareP(a: readonly string[], b: readonly string[]): number {
  const counts = new Map<string, [number, number]>();
  for (const x of a) counts.set(x, [(counts.get(x)?.[0] ?? 0) + 1, counts.get(x)?.[1] ?? 0]);
  for (const x of b) counts.set(x, [counts.get(x)?.[0] ?? 0, (counts.get(x)?.[1] ?? 0) + 1]);
  // Rare outcomes pooled, so every expected count is at least 5.
  const rows: Array<[number, number]> = [];
  const rare: [number, number] = [0, 0];
  for (const [x, y] of counts.values()) {
    if (x + y >= 10) rows.push([x, y]);
    else [rare[0], rare[1]] = [rare[0] + x, rare[1] + y];
  }
  if (rare[0] + rare[1] > 0) rows.push(rare);
  const [na, nb] = [a.length, b.length];
  let chi = 0;
  for (const [x, y] of rows) {
    const total = x + y;
    const ex = (total * na) / (na + nb);
    const ey = (total * nb) / (na + nb);
    chi += (x - ex) ** 2 / ex + (y - ey) ** 2 / ey;
  }
  return chiSquareSurvival(chi, Math.max(1, rows.length - 1));
}

/** P(X >= x) for X ~ chi-square(k), by the regularised upper incomplete gamma (series / continued fraction). */
function chiSquareSurvival(x: number, k: number): number {
  const s = k / 2;
  const z = x / 2;
  if (z <= 0) return 1;
  const logGamma = (v: number): number => {
    // biome-ignore lint/correctness/noPrecisionLoss: Lanczos's coefficients as published (Numerical Recipes' gammln)
    const c = [76.18009172947146, -86.50532032941677, 24.01409824083091, -1.231739572450155, 0.1208650973866179e-2, -0.5395239384953e-5];
    let y = v;
    const t = v + 5.5 - (v + 0.5) * Math.log(v + 5.5);
    let sum = 1.000000000190015;
    for (const coefficient of c) sum += coefficient / ++y;
    // biome-ignore lint/correctness/noPrecisionLoss: sqrt(2*pi) as published with the coefficients above
    return -t + Math.log((2.5066282746310005 * sum) / v);
  };
  if (z < s + 1) {
    let term = 1 / s;
    let sum = term;
    for (let n = 1; n < 500; n++) sum += term *= z / (s + n);
    return 1 - sum * Math.exp(-z + s * Math.log(z) - logGamma(s));
  }
  let b = z + 1 - s;
  let c = 1e300;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 500; i++) {
    const an = -i * (i - s);
    b += 2;
    d = 1 / (an * d + b);
    c = b + an / c;
    h *= d * c;
  }
  return Math.exp(-z + s * Math.log(z) - logGamma(s)) * h;
}

describe("speculative decoding on the real models", () => {
  const off = new Map<string, OpenAI.ChatCompletion>();
  let server: RunningServer;
  let client: OpenAI;
  const ask = (c: OpenAI, model: string, body: Body) =>
    c.chat.completions.create({
      model,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
      ...body,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);

  before(async () => {
    const baseline = await startServer({ models: MODELS, env: { SWITCHYARD_SPECULATION: "off" } });
    try {
      const baselineClient = new OpenAI({ apiKey: baseline.key, baseURL: baseline.baseURL, timeout: 600_000, maxRetries: 0 });
      for (const model of MODELS) for (const c of casesOf(model)) off.set(`${model} ${c.name}`, await ask(baselineClient, model, c.body));
    } finally {
      await baseline.stop();
    }
    server = await startServer({ models: MODELS, env: { SWITCHYARD_SPECULATION: "auto" } });
    client = new OpenAI({ apiKey: server.key, baseURL: server.baseURL, timeout: 600_000, maxRetries: 0 });
  });
  after(async () => {
    await server?.stop();
  });

  for (const model of MODELS) {
    test(`${model}: temperature 0 gives the same output with speculation as without, with or without a prediction, grammar or not`, async (t) => {
      const before = await speculation(server);
      let identical = 0;
      let compared = 0;
      for (const c of casesOf(model)) {
        const expected = off.get(`${model} ${c.name}`)!;
        const answer = expected.choices[0]!.message.content ?? "";
        const bodies = [
          c.body,
          ...c.predictions.map((predict) => ({ ...c.body, prediction: { type: "content" as const, content: predict(answer) } })),
        ];
        for (const [i, body] of bodies.entries()) {
          compared++;
          if (agreeUpToTies(await ask(client, model, body), expected, `${model}, ${c.name}${i > 0 ? `, prediction ${i}` : ""}`))
            identical++;
        }
      }
      const after = await speculation(server);
      assert.ok(
        after.accepted > before.accepted,
        `drafts were verified and accepted (${after.draft - before.draft} drafted, ${after.accepted - before.accepted} accepted)`,
      );
      t.diagnostic(`${identical} of ${compared} answers identical, the others apart from a tie`);
    });
  }

  test("sampled, the output's distribution is the same with speculation as without: the same draw for each seed, and a chi-square test", async (t) => {
    // The server's cores go to the engine under test here.
    await server.stop();
    const off = await draws("off");
    const on = await draws("auto");
    assert.equal(off.drafted, 0);
    t.diagnostic(`sampled draws with speculation: ${on.drafted} draft tokens, ${on.accepted} accepted`);
    assert.ok(on.accepted > 0, `the sampled requests drafted and had drafts accepted (${on.drafted} drafted, ${on.accepted} accepted)`);
    assert.equal(on.texts.length, DRAW_GROUPS * DRAW_CHOICES);
    // Each output token is sampled from the model's distribution at its position by the request's
    // own seeded chain, one draw per token, drafted or not: the same seed gives the same text.
    const same = on.texts.filter((text, i) => text === off.texts[i]).length;
    assert.ok(same >= on.texts.length * 0.98, `${same} of ${on.texts.length} seeded draws agree`);
    const p = chiSquareP(off.texts, on.texts);
    assert.ok(p > 0.01, `chi-square p = ${p}`);
  });
});
