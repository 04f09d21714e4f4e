/**
 * The first parallel burst after the engine loads, against the same burst warm: 8 requests at once
 * (greedy, 32 tokens each), three times, on the embedded engine directly (no HTTP). Prints the wall
 * time of each burst. Usage: npm run build && node --import tsx bench/cold-start.ts [model.gguf]
 */
import { homedir } from "node:os";
import { join } from "node:path";
import type { loadModelHost as LoadModelHost } from "../src/engine/model-host.js";

// The compiled engine: its worker threads load .js files (run `npm run build` first).
const compiled: string = "../dist/engine/model-host.js";
const { loadModelHost } = (await import(compiled)) as { loadModelHost: typeof LoadModelHost };

const modelPath =
  process.argv[2] ?? join(homedir(), ".cache/switchyard/models/HuggingFaceTB--SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
const host = await loadModelHost({
  modelPath,
  sequences: 8,
  contextWindow: 8192,
  maxWaiting: 64,
  flexMaxWaitMs: 60_000,
  prefixCache: false,
  stallTimeoutMs: 120_000,
});

async function burst(round: number): Promise<number> {
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 8 }, async (_, i) => {
      const { tokens } = await host.tokenizeChat([
        { role: "user", content: `Round ${round}, story ${i}: tell me about a lighthouse keeper.` },
      ]);
      const [stream] = host.generate([{ promptTokens: tokens, maxTokens: 32, sampling: { temperature: 0, topP: 1 }, stop: [] }]);
      for await (const _event of stream!);
    }),
  );
  return performance.now() - started;
}

const times: number[] = [];
for (let round = 0; round < 3; round++) times.push(await burst(round));
console.log(
  `8 parallel requests: cold ${times[0]!.toFixed(0)} ms, then warm ${times
    .slice(1)
    .map((t) => t.toFixed(0))
    .join(" / ")} ms (ratio ${(times[0]! / Math.min(...times.slice(1))).toFixed(2)})`,
);
console.log(JSON.stringify(host.stats().engine), JSON.stringify(host.stats().stepBudgets));
await host.close();
