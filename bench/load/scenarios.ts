import { adapterMixScenarios } from "../adapter-mix.js";
import { priorityBesideScenarios } from "../priority-beside.js";
import type { RandomScenario, Scenario } from "./scenario.js";

/**
 * The scenarios bench:compare and bench:ab run, by name. `scale` shrinks request counts for a
 * quick run (a quarter, at least 2). Random prompts are about `inputTokens` tokens of common words.
 */
export function scenarioSet(quick: boolean): Record<string, Scenario[]> {
  const scale = (n: number) => (quick ? Math.max(2, Math.ceil(n / 4)) : n);
  const c16: RandomScenario = {
    kind: "random",
    name: "random 128/128 c16",
    inputTokens: 128,
    outputTokens: 128,
    maxConcurrency: 16,
    requestRate: Infinity,
    requests: scale(48),
  };
  const c8: RandomScenario = { ...c16, name: "random 128/128 c8", maxConcurrency: 8, requests: scale(24) };
  const c1: RandomScenario = { ...c16, name: "random 128/128 c1", maxConcurrency: 1, requests: scale(8) };
  // Issue 56's shape: 100 random words, 64 tokens out, llama-server's sampling spelled out, every
  // prompt sent once before (a retry, a regenerate, a resent conversation): all prompts cached.
  const cached = (concurrency: number): RandomScenario => ({
    kind: "random",
    name: `cached 112/64 c${concurrency}`,
    inputTokens: 112,
    outputTokens: 64,
    maxConcurrency: concurrency,
    requestRate: Infinity,
    requests: concurrency === 1 ? 4 : concurrency,
    cachedPrompts: true,
  });
  const tiers = (name: string, requests: number, outputTokens: number, concurrency: number, tierMix: Record<string, number>) =>
    ({
      kind: "random",
      name,
      requests,
      inputTokens: 128,
      outputTokens,
      maxConcurrency: concurrency,
      requestRate: Infinity,
      tierMix,
    }) as const;
  const mix = { priority: 0.2, default: 0.5, flex: 0.3 };
  return {
    "random-c16": [c16],
    "random-c8": [c8],
    "random-c1": [c1],
    "openai-c16": [{ ...c16, name: "openai sampling c16", sampling: "openai" }],
    "openai-c8": [{ ...c8, name: "openai sampling c8", sampling: "openai" }],
    "openai-c1": [{ ...c1, name: "openai sampling c1", sampling: "openai" }],
    "cached-c16": [cached(16)],
    "cached-c8": [cached(8)],
    "cached-c1": [cached(1)],
    "disturbed-c16": [{ ...c16, name: "random c16, one core busy", disturbed: true }],
    "priority-beside": priorityBesideScenarios(quick ? 20 : 60),
    "adapter-mix": adapterMixScenarios(scale(48)),
    multiturn: [{ kind: "multiturn", name: "multiturn 6 turns", conversations: scale(8), turns: 6, outputTokens: 48, maxConcurrency: 4 }],
    mixed: [
      tiers("priority unloaded", scale(8), 64, 1, { priority: 1 }),
      // Priority's own load in the mix (a fifth of 48 clients), with no other tier: what isolation can at best give it.
      tiers("priority alone, 10 clients", scale(20), 64, 10, { priority: 1 }),
      tiers("mixed 20/50/30 saturating", scale(96), 64, 48, mix),
    ],
    // The tier mix alone (bench:ab's tier scenario: the saturating mix without its unloaded references).
    "tier-mix": [tiers("mixed 20/50/30 saturating", scale(96), 64, 48, mix)],
    // The same tier mix with a Batch API job underneath, more lines than the run can finish: batch
    // lines run only on capacity no tier waits for, so the tiers' figures must match the run without it.
    "mixed-batch": [
      {
        ...tiers("mixed 20/50/30 saturating, batch underneath", scale(96), 64, 48, mix),
        backgroundBatch: { lines: 2000, outputTokens: 64 },
      },
    ],
  };
}

/** One short request per target before measuring, so model loading and first-call costs stay out of the numbers. */
export const WARM_UP: RandomScenario = {
  kind: "random",
  name: "warm-up",
  requests: 2,
  inputTokens: 16,
  outputTokens: 8,
  maxConcurrency: 2,
  requestRate: Infinity,
};

/** The llama-batched-bench shape (prompt, generated, sequences) a random scenario's batches take; null for others. */
export function batchShape(scenario: Scenario): { prompt: number; generate: number; sequences: number } | null {
  if (scenario.kind !== "random" || scenario.tierMix || scenario.modelMix || scenario.disturbed) return null;
  return { prompt: scenario.inputTokens, generate: scenario.outputTokens, sequences: scenario.maxConcurrency };
}
