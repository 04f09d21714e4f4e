/**
 * Streaming throughput of a running server: N concurrent streams, each asking for a fixed number of
 * tokens, repeated for each concurrency level. Prints a table and writes JSON.
 *
 *   node --import tsx bench/throughput.ts --url http://127.0.0.1:8080 --key $KEY \
 *     [--model HuggingFaceTB/SmolLM2-135M-Instruct] [--concurrency 1,8] [--max-tokens 128] [--rounds 2]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { sseData } from "./sse.js";

const { values } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:8080" },
    key: { type: "string", default: process.env.SWITCHYARD_API_KEY },
    model: { type: "string", default: "HuggingFaceTB/SmolLM2-135M-Instruct" },
    concurrency: { type: "string", default: "1,8" },
    "max-tokens": { type: "string", default: "128" },
    rounds: { type: "string", default: "2" },
    out: { type: "string", default: "bench/results/throughput.json" },
  },
});
if (!values.key) throw new Error("--key (or SWITCHYARD_API_KEY) is required");
const maxTokens = Number(values["max-tokens"]);

interface StreamResult {
  completionTokens: number;
  ttftMs: number;
  totalMs: number;
}

async function oneStream(i: number): Promise<StreamResult> {
  const start = performance.now();
  const response = await fetch(`${values.url}/v1/compat/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${values.key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: values.model,
      messages: [{ role: "user", content: `Write a long story about lighthouse number ${i}.` }],
      max_tokens: maxTokens,
      temperature: 0.8,
      seed: i,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  let ttftMs = -1;
  let completionTokens = 0;
  for await (const data of sseData(response.body as AsyncIterable<Uint8Array>)) {
    const chunk = JSON.parse(data);
    if (chunk.choices?.[0]?.delta?.content && ttftMs < 0) ttftMs = performance.now() - start;
    if (chunk.usage) completionTokens = chunk.usage.completion_tokens;
  }
  return { completionTokens, ttftMs, totalMs: performance.now() - start };
}

const rows = [];
for (const concurrency of values.concurrency.split(",").map(Number)) {
  for (let round = 0; round < Number(values.rounds); round++) {
    const start = performance.now();
    const results = await Promise.all(Array.from({ length: concurrency }, (_, i) => oneStream(round * 100 + i)));
    const seconds = (performance.now() - start) / 1000;
    const tokens = results.reduce((sum, r) => sum + r.completionTokens, 0);
    const ttfts = results.map((r) => r.ttftMs).sort((a, b) => a - b);
    rows.push({
      concurrency,
      round,
      completion_tokens: tokens,
      seconds: Number(seconds.toFixed(3)),
      output_tokens_per_s: Number((tokens / seconds).toFixed(1)),
      per_stream_tokens_per_s: Number((tokens / seconds / concurrency).toFixed(1)),
      ttft_p50_ms: Number(ttfts[Math.floor(ttfts.length / 2)]!.toFixed(0)),
    });
  }
}

console.table(rows);
mkdirSync(new URL(".", `file://${process.cwd()}/${values.out}`).pathname, { recursive: true });
writeFileSync(values.out, JSON.stringify({ model: values.model, max_tokens: maxTokens, at: new Date().toISOString(), rows }, null, 2));
console.log(`wrote ${values.out}`);
