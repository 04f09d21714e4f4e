/**
 * LoRA adapters beside their base model on a running server: C concurrent requests (a fixed number
 * of tokens each, ends banned) for the base alone, half base and half adapter, and the adapter
 * alone. A step runs one adapter's sequences, so a mix splits the batch in two and takes turns.
 * Prints aggregate tokens per second and each request's mean time per token.
 *
 *   node --import tsx bench/lora-mix.ts --url http://127.0.0.1:8080 --key $KEY --adapter test/smollm2-lora \
 *     [--model HuggingFaceTB/SmolLM2-135M-Instruct] [--concurrency 16] [--max-tokens 128] [--rounds 2]
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:8080" },
    key: { type: "string", default: process.env.SWITCHYARD_API_KEY },
    model: { type: "string", default: "HuggingFaceTB/SmolLM2-135M-Instruct" },
    adapter: { type: "string" },
    concurrency: { type: "string", default: "16" },
    "max-tokens": { type: "string", default: "128" },
    rounds: { type: "string", default: "2" },
  },
});
if (!values.key || !values.adapter) throw new Error("--key (or SWITCHYARD_API_KEY) and --adapter are required");
const [concurrency, maxTokens, rounds] = [Number(values.concurrency), Number(values["max-tokens"]), Number(values.rounds)];

async function one(model: string, i: number): Promise<{ tokens: number; ms: number }> {
  const started = performance.now();
  const response = await fetch(`${values.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${values.key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content: `Write a long story about lighthouse number ${i}.` }],
      max_tokens: maxTokens,
      temperature: 0,
      logit_bias: { "0": -100, "2": -100, "4": -100 },
    }),
  });
  if (response.status !== 200) throw new Error(`${model}: ${response.status} ${await response.text()}`);
  const body = (await response.json()) as { usage: { completion_tokens: number } };
  return { tokens: body.usage.completion_tokens, ms: performance.now() - started };
}

async function scenario(name: string, adapterShare: number): Promise<void> {
  const results: Array<{ tokens: number; ms: number }> = [];
  let wall = 0;
  for (let round = 0; round < rounds; round++) {
    const started = performance.now();
    const models = Array.from({ length: concurrency }, (_, i) =>
      i < Math.round(concurrency * adapterShare) ? values.adapter! : values.model!,
    );
    results.push(...(await Promise.all(models.map((model, i) => one(model, round * concurrency + i)))));
    wall += performance.now() - started;
  }
  const tokens = results.reduce((n, r) => n + r.tokens, 0);
  const perToken = results.map((r) => r.ms / r.tokens).sort((a, b) => a - b);
  console.log(
    `${name.padEnd(22)} ${(tokens / (wall / 1000)).toFixed(1).padStart(7)} tok/s   ms/token p50 ${perToken[Math.floor(perToken.length / 2)]!.toFixed(1)}`,
  );
}

await one(values.model!, -1); // warm-up
await one(values.adapter!, -1);
await scenario("base only", 0);
await scenario("half base, half adapter", 0.5);
await scenario("adapter only", 1);
await scenario("base only (again)", 0);
