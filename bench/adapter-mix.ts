import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { RandomScenario, ScenarioReport } from "./load/scenario.js";

/**
 * `adapter-mix` (issue 35): a LoRA adapter beside its base model on our engine. 16 concurrent
 * streams of the base alone, then half base and half adapter (each request's model drawn at
 * random, seeded), then the adapter alone, then the base alone again (the two base-only runs show
 * what the machine's noise does to the same load). llama.cpp applies an adapter to a whole batch,
 * so a shard that holds both runs them in turns; the mix's throughput against the base's says what
 * serving adapters per request costs.
 *
 * The adapter is the French one of bench/adapters/french (trained by its recipe when the scenario
 * runs, or taken from its cache), served from a catalog file of its own. Every request bans the end
 * tokens, so each decodes exactly its 128 tokens whatever the model would say (the adapter answers
 * shorter), and the figures compare the engine's work, not the answers' lengths.
 */
export const FRENCH_ADAPTER = "switchyard/smollm2-french";
/** The base the recipe trains on: the scenario runs only on it. */
export const FRENCH_BASE = "HuggingFaceTB/SmolLM2-135M-Instruct";

const ROOT = resolve(import.meta.dirname, "..");
/** The tokens llama.cpp ends a SmolLM2 generation on (0, 2 and 4, as test/helpers/server.ts bans them): banned. */
const NO_END = { logit_bias: { "0": -100, "2": -100, "4": -100 } };

export const BASE_ONLY = "adapter-mix: base only c16";
export const MIXED = "adapter-mix: half base, half adapter c16";
export const ADAPTER_ONLY = "adapter-mix: adapter only c16";
export const BASE_AGAIN = "adapter-mix: base only c16, again";

export function adapterMixScenarios(requests: number): RandomScenario[] {
  const shape = {
    kind: "random",
    inputTokens: 128,
    outputTokens: 128,
    maxConcurrency: 16,
    requestRate: Infinity,
    requests,
    fields: NO_END,
  } as const;
  return [
    { ...shape, name: BASE_ONLY, modelMix: { [FRENCH_BASE]: 1 } },
    { ...shape, name: MIXED, modelMix: { [FRENCH_BASE]: 0.5, [FRENCH_ADAPTER]: 0.5 } },
    { ...shape, name: ADAPTER_ONLY, modelMix: { [FRENCH_ADAPTER]: 1 } },
    { ...shape, name: BASE_AGAIN, modelMix: { [FRENCH_BASE]: 1 } },
  ];
}

/**
 * Builds the French adapter if its cache is missing or stale (bench/adapters/french: the venv once,
 * then a few minutes of training on the CPU) and writes a catalog file that serves it. Returns the
 * catalog's path, for SWITCHYARD_CATALOG.
 */
export function prepareFrenchAdapter(): string {
  const recipe = join(ROOT, "bench/adapters/french");
  const out = join(ROOT, ".cache/adapters/smollm2-french");
  execFileSync("bash", [join(recipe, "setup.sh")], { stdio: ["ignore", "inherit", "inherit"] });
  execFileSync(join(ROOT, ".cache/py-train/bin/python"), [join(recipe, "train.py"), "--out", out], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  const catalog = join(mkdtempSync(join(tmpdir(), "switchyard-adapter-mix-")), "catalog.json");
  const entry = { id: FRENCH_ADAPTER, adapter_of: FRENCH_BASE, source: `file:${out}`, context_length: 8192 };
  writeFileSync(catalog, JSON.stringify({ models: [{ ...entry, precision: "f32", tags: ["JSON"], created: 1764288000 }] }));
  return catalog;
}

/** The ratio (the mix against the base alone, before and after it, averaged) and the noise beside it. */
export function adapterMixRatios(find: (scenario: string) => ScenarioReport | undefined): Record<string, number | null> {
  const rate = (scenario: string) => find(scenario)?.outputTokensPerS;
  const ratio = (a: number | undefined, b: number | undefined) =>
    a !== undefined && b !== undefined && b > 0 ? Math.round((a / b) * 100) / 100 : null;
  const before = rate(BASE_ONLY);
  const after = rate(BASE_AGAIN);
  const baseOnly = before !== undefined && after !== undefined ? (before + after) / 2 : (before ?? after);
  return {
    "adapter-mix: half base, half adapter c16 out tok/s vs base only (target >= 0.85)": ratio(rate(MIXED), baseOnly),
    "adapter-mix: adapter only c16 out tok/s vs base only": ratio(rate(ADAPTER_ONLY), baseOnly),
    "adapter-mix: base only again vs before (the noise)": ratio(after, before),
  };
}
