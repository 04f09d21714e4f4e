import { runBatchedBench, type PeerOptions } from "../peers/targets.js";
import type { Scenario, ScenarioReport } from "./scenario.js";
import { batchShape } from "./scenarios.js";

/**
 * The hardware's ceiling for a scenario's batch shape, from llama.cpp's llama-batched-bench on the
 * same file and threads, with no server around it: S_PP (prefill tokens/s) and S_TG (decode
 * tokens/s) for `sequences` sequences of `prompt` tokens generating `generate` each. `limit` is the
 * output tokens/s a server reaches if it does nothing but that compute: every prompt prefilled at
 * S_PP, every output token decoded at S_TG (for cached prompts, decode alone).
 */
export interface Ceiling {
  prompt: number;
  generate: number;
  sequences: number;
  sPp: number;
  sTg: number;
  limit: number;
}

/** Each scenario's ceiling by scenario name, measured once per distinct shape; empty when llama-batched-bench is not built. */
export function ceilingsFor(peer: PeerOptions, scenarios: Scenario[]): Map<string, Ceiling> {
  const byShape = new Map<string, { sPp: number; sTg: number } | null>();
  const ceilings = new Map<string, Ceiling>();
  for (const scenario of scenarios) {
    const shape = batchShape(scenario);
    if (!shape) continue;
    const key = `${shape.prompt}/${shape.generate}x${shape.sequences}`;
    if (!byShape.has(key)) {
      process.stderr.write(`llama-batched-bench ${key}...\n`);
      byShape.set(key, runBatchedBench(peer, shape));
    }
    const measured = byShape.get(key);
    if (!measured) continue;
    const cached = scenario.kind === "random" && scenario.cachedPrompts === true;
    const secondsPerOutput = (cached ? 0 : shape.prompt / measured.sPp) + shape.generate / measured.sTg;
    ceilings.set(scenario.name, { ...shape, ...measured, limit: shape.generate / secondsPerOutput });
  }
  return ceilings;
}

/** One row per report whose scenario has a ceiling: its output tokens/s as a fraction of the limit and of S_TG. */
export function ceilingRows(reports: readonly ScenarioReport[], ceilings: ReadonlyMap<string, Ceiling>): object[] {
  const round = (n: number, d: number) => Number(n.toFixed(d));
  return reports.flatMap((r) => {
    const c = ceilings.get(r.scenario);
    if (!c) return [];
    return [
      {
        target: r.target,
        scenario: r.scenario,
        "out tok/s": round(r.outputTokensPerS, 1),
        S_PP: c.sPp,
        S_TG: c.sTg,
        "limit tok/s": round(c.limit, 1),
        "÷ limit": round(r.outputTokensPerS / c.limit, 2),
        "÷ S_TG": round(r.outputTokensPerS / c.sTg, 2),
      },
    ];
  });
}
