import type { ScenarioReport } from "../load/scenario.js";

/** What bench:ab compares of a scenario's run (a load scenario's report, or an edit pass's figures). */
export type Compared = Pick<ScenarioReport, "outputTokensPerS" | "ttftMs" | "itlMs" | "tpotMs">;

/** What bench:ab compares per scenario, and which way is better. */
export const MEASURES = [
  { name: "out tok/s", higherIsBetter: true, of: (r: Compared) => r.outputTokensPerS },
  { name: "TTFT p50 ms", higherIsBetter: false, of: (r: Compared) => r.ttftMs.p50 },
  { name: "ITL p99 ms", higherIsBetter: false, of: (r: Compared) => r.itlMs.p99 },
  { name: "TPOT mean ms", higherIsBetter: false, of: (r: Compared) => r.tpotMs.mean },
] as const;

export interface Judged {
  /** Median of the per-round ratios (this side ÷ the other). */
  median: number;
  min: number;
  max: number;
  /** "worse" or "better" only when every round's ratio lies on that side of parity (the spread excludes 1). */
  verdict: "better" | "worse" | "parity";
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * Judges one measure from its per-round ratios. Rounds run the two sides back to back (A B, then
 * B A), so drift and a neighbour's burst weigh on both sides of a round alike; the median says how
 * big the change is and the spread whether the rounds agree on its side.
 */
export function judge(ratios: readonly number[], higherIsBetter: boolean): Judged | null {
  const finite = ratios.filter(Number.isFinite);
  if (finite.length === 0) return null;
  const [min, max] = [Math.min(...finite), Math.max(...finite)];
  const gain = (r: number) => (higherIsBetter ? r > 1 : r < 1);
  const loss = (r: number) => (higherIsBetter ? r < 1 : r > 1);
  const verdict = finite.length >= 2 && finite.every(gain) ? "better" : finite.length >= 2 && finite.every(loss) ? "worse" : "parity";
  return { median: median(finite), min, max, verdict };
}

/** The change a median ratio means, as a signed percentage where negative is worse (e.g. "-4.2%"). */
export function changePercent(ratio: number, higherIsBetter: boolean): string {
  const change = higherIsBetter ? ratio - 1 : 1 / ratio - 1;
  return `${change >= 0 ? "+" : ""}${(change * 100).toFixed(1)}%`;
}
