/** Display helpers. Money stays the exact decimal text the API sent; only charts turn it into numbers. */

export type Decimal = string | number;

export function dollars(value: Decimal | undefined | null): string {
  if (value === undefined || value === null) return "–";
  return `$${String(value)}`;
}

export function integer(value: number | undefined | null): string {
  return value === undefined || value === null ? "–" : value.toLocaleString("en-US");
}

/** Seconds since the epoch (the API's timestamps) as a short UTC date and time. */
export function when(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "–";
  return `${new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

export function ms(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}

/** A UTC calendar day, YYYY-MM-DD. */
export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

export function addDays(day: string, days: number): string {
  const date = new Date(`${day}T00:00:00Z`);
  date.setUTCDate(date.getUTCDate() + days);
  return utcDay(date);
}

/** Exact product of two plain decimal strings ("0.02" × "1.5" = "0.03"), on digits, never floats. */
export function multiplyDecimal(a: string, b: string): string {
  const [ai, as] = splitDecimal(a);
  const [bi, bs] = splitDecimal(b);
  const scale = as + bs;
  const digits = (ai * bi).toString().padStart(scale + 1, "0");
  const whole = digits.slice(0, digits.length - scale);
  const fraction = digits.slice(digits.length - scale).replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole;
}

function splitDecimal(text: string): [bigint, number] {
  const [whole = "0", fraction = ""] = text.split(".");
  return [BigInt(whole + fraction), fraction.length];
}
