/** Just enough of the Prometheus text format to read /metrics: samples, and quantiles from histogram deltas. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = LINE.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const [, name, value] of (match[2] ?? "").matchAll(LABEL)) labels[name!] = value!.replace(/\\(.)/g, "$1");
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** Sum of a metric's samples whose labels include `match`. */
export function total(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** Cumulative bucket counts by upper bound, summed over every series matching `match`. */
export function buckets(samples: Sample[], histogram: string, match: Record<string, string>): Map<number, number> {
  const counts = new Map<number, number>();
  for (const s of samples) {
    if (s.name !== `${histogram}_bucket` || !Object.entries(match).every(([k, v]) => s.labels[k] === v)) continue;
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    counts.set(le, (counts.get(le) ?? 0) + s.value);
  }
  return counts;
}

/**
 * The q-quantile of the observations made between two scrapes, interpolated within a bucket as
 * Prometheus's histogram_quantile does. null when nothing was observed in between.
 */
export function quantileBetween(before: Map<number, number>, after: Map<number, number>, q: number): number | null {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const delta = bounds.map((le) => Math.max(0, (after.get(le) ?? 0) - (before.get(le) ?? 0)));
  const count = delta[delta.length - 1] ?? 0;
  if (count === 0) return null;
  const rank = q * count;
  for (let i = 0; i < bounds.length; i++) {
    if (delta[i]! >= rank) {
      const upper = bounds[i]!;
      const lower = i === 0 ? 0 : bounds[i - 1]!;
      if (upper === Infinity) return lower;
      const below = i === 0 ? 0 : delta[i - 1]!;
      const inBucket = delta[i]! - below;
      return inBucket === 0 ? upper : lower + (upper - lower) * ((rank - below) / inBucket);
    }
  }
  return bounds[bounds.length - 2] ?? null;
}
