/**
 * The service tiers: one vocabulary from the wire to the scheduling policy. "default" is OpenAI's
 * name for the standard tier (a response's `service_tier` says "default"), and the engine schedules
 * by these same names, so nothing translates between a billed tier and a scheduling class.
 * `batch`: lines of the Batch API only; no request asks for it.
 */
export type ServiceTier = "default" | "priority" | "flex" | "batch";

/**
 * Every tier in scheduling order, priority first: the order queues are served in, and the order
 * /health and /metrics list the tiers.
 */
export const SERVICE_TIERS: readonly ServiceTier[] = ["priority", "default", "flex", "batch"];

/**
 * What a client may send as `service_tier` (OpenAI's values; null/absent mean the same as "auto").
 * Billing resolves it to a ServiceTier: "scale" (reserved capacity) and "fast" are served as the
 * closest tier we have, priority.
 */
export const REQUESTED_TIERS = ["auto", "default", "priority", "flex", "scale", "fast"] as const;
export type RequestedTier = (typeof REQUESTED_TIERS)[number];

/** One value for each tier (requests running, waiting, queues, targets). */
export type PerTier<T> = Record<ServiceTier, T>;

/** Each tier's value from one function of the tier, so no tier is left out by hand. */
export function perTier<T>(value: (tier: ServiceTier) => T): PerTier<T> {
  return Object.fromEntries(SERVICE_TIERS.map((tier) => [tier, value(tier)])) as PerTier<T>;
}

/** Each tier's place in SERVICE_TIERS (priority 0): lower goes first wherever tiers are ranked. */
export const TIER_RANK: Readonly<PerTier<number>> = perTier((tier) => SERVICE_TIERS.indexOf(tier));

/** Each tier's count summed over `items` (shards, instances, replicas). */
export function sumPerTier<T>(items: readonly T[], pick: (item: T) => PerTier<number>): PerTier<number> {
  return perTier((tier) => items.reduce((n, item) => n + pick(item)[tier], 0));
}

/** The counts of `tiers` (all of them unless told) added up. */
export function tierTotal(counts: PerTier<number>, tiers: readonly ServiceTier[] = SERVICE_TIERS): number {
  return tiers.reduce((n, tier) => n + counts[tier], 0);
}
