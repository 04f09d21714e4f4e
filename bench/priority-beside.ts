import type { ClientsScenario, ScenarioReport } from "./load/scenario.js";

/**
 * `priority-beside` (issue 32): a few priority clients alone, then beside 30 lower-tier clients that
 * saturate the machine (20 standard, 10 flex), all closed loops of ~120-token prompts and 64 tokens
 * out. Priority pays for its targets where the machine is full of cheaper work, not where it is alone.
 */
export const PRIORITY_COUNTS = [1, 2, 4] as const;
const LOWER = { default: 20, flex: 10 };
const shape = { kind: "clients", inputTokens: 120, outputTokens: 64 } as const;

export const alone = (n: number) => `priority ${n} alone`;
export const beside = (n: number) => `priority ${n} beside 30 lower`;
export const LOWER_ALONE = "30 lower-tier clients alone";

export function priorityBesideScenarios(durationS: number): ClientsScenario[] {
  return [
    ...PRIORITY_COUNTS.map((n) => ({ ...shape, name: alone(n), clients: { priority: n }, durationS: Math.max(10, durationS / 2) })),
    { ...shape, name: LOWER_ALONE, clients: LOWER, durationS },
    ...PRIORITY_COUNTS.map((n) => ({ ...shape, name: beside(n), clients: { priority: n, ...LOWER }, durationS })),
  ];
}

/** The issue's ratios, for each priority count: latency beside the others against alone, and what the mix keeps of the lower tiers' throughput. */
export function priorityBesideRatios(find: (scenario: string) => ScenarioReport | undefined): Record<string, number | null> {
  const ratio = (a: number | undefined, b: number | undefined) =>
    a !== undefined && b !== undefined && b > 0 ? Math.round((a / b) * 100) / 100 : null;
  const rows: Record<string, number | null> = {};
  for (const n of PRIORITY_COUNTS) {
    const mixed = find(beside(n))?.byTier.priority;
    const own = find(alone(n))?.byTier.priority;
    rows[`priority-beside ${n}: priority TTFT p99 beside 30 vs alone (target <= 1.5)`] = ratio(mixed?.ttftMs.p99, own?.ttftMs.p99);
    rows[`priority-beside ${n}: priority ITL p99 beside 30 vs alone (target <= 2)`] = ratio(mixed?.itlMs.p99, own?.itlMs.p99);
    rows[`priority-beside ${n}: priority TTFT p99 beside 30, ms (target <= 1000)`] = mixed ? Math.round(mixed.ttftMs.p99) : null;
    rows[`priority-beside ${n}: priority ITL p99 beside 30, ms (target <= 50)`] = mixed ? Math.round(mixed.itlMs.p99) : null;
    rows[`priority-beside ${n}: mix out tok/s vs lower tiers alone (target >= 0.9)`] = ratio(
      find(beside(n))?.outputTokensPerS,
      find(LOWER_ALONE)?.outputTokensPerS,
    );
  }
  return rows;
}
