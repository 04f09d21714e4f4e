/**
 * The price of dedicated instance time, as pure functions. Instance time is measured in whole
 * milliseconds (the database truncates its clock to them), so seconds are exact decimals; the
 * price is per hour, and cost = seconds × hourly ÷ 3600, rounded half-up to 12 decimal places
 * (a millionth of a micro-dollar) once per billed segment. With a per-hour price that is a
 * multiple of 0.0036 (SmolLM2's 0.36) no rounding happens at all.
 */
import { Dec, parseNonNegative, toText } from "./decimal.js";

/** Decimal places a segment's cost keeps. */
export const INSTANCE_COST_DECIMALS = 12;

const SECONDS_PER_HOUR = Dec("3600");
const MS_PER_SECOND = Dec("1000");

/** Whole milliseconds as exact decimal seconds ("1.5" for 1500). */
export function millisecondsToSeconds(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0) throw new RangeError(`milliseconds must be a non-negative safe integer, got ${String(ms)}`);
  return toText(Dec(String(ms)).div(MS_PER_SECOND));
}

/** seconds × hourly ÷ 3600, half-up to INSTANCE_COST_DECIMALS places; both inputs decimal strings. */
export function instanceTimeCost(seconds: string, hourlyUsd: string): string {
  const cost = parseNonNegative(seconds, "seconds").times(parseNonNegative(hourlyUsd, "hourlyUsd"));
  // big.js divides to 20 places; ÷3600 only ever repeats one digit (the factor 9), never a run of
  // 9s, so rounding those 20 places to 12 gives the same as rounding the true quotient.
  return toText(cost.div(SECONDS_PER_HOUR).round(INSTANCE_COST_DECIMALS, Dec.roundHalfUp));
}

export interface Segment {
  startMs: number;
  endMs: number;
}

/**
 * The segments to bill for an instance billed until `fromMs`, now known to have run until `toMs`:
 * whole segments of `segmentMs` (an hour by default), and, when the instance has stopped (`final`),
 * the rest up to `toMs`. Segments never overlap and never reach past `toMs`.
 */
export function segmentsToBill(fromMs: number, toMs: number, segmentMs: number, final: boolean): Segment[] {
  if (!(segmentMs > 0)) throw new RangeError("segmentMs must be positive");
  const segments: Segment[] = [];
  let start = fromMs;
  while (toMs - start >= segmentMs) {
    segments.push({ startMs: start, endMs: start + segmentMs });
    start += segmentMs;
  }
  if (final && toMs > start) segments.push({ startMs: start, endMs: toMs });
  return segments;
}

/** The price of one billed segment of `segmentMs` at `hourlyUsd`: what an instance holds against a budget ahead. */
export function segmentCost(hourlyUsd: string, segmentMs: number): string {
  return instanceTimeCost(millisecondsToSeconds(segmentMs), hourlyUsd);
}
