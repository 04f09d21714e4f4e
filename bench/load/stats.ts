/** Summary statistics the way `vllm bench serve` reports them. */
export interface Summary {
  mean: number;
  p50: number;
  p99: number;
  count: number;
}

export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) return { mean: NaN, p50: NaN, p99: NaN, count: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  return { mean: sorted.reduce((a, b) => a + b, 0) / sorted.length, p50: at(0.5), p99: at(0.99), count: sorted.length };
}

/** Exponential inter-arrival gaps: a Poisson process of `rate` requests per second. */
export function poissonGapMs(rate: number, random: () => number): number {
  return (-Math.log(1 - random()) / rate) * 1000;
}

/** A small seeded generator (mulberry32), so a run's prompts and arrivals can be repeated. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
