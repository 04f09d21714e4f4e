import type { EngineRequest } from "./request.js";
import { TIER_RANK as RANK } from "../../protocol/tiers.js";

/**
 * Fairness between accounts within a tier, so that one account's backlog (long streams, `n: 8`,
 * streams nobody reads) cannot make another account wait for all of it: a shard admits, among the
 * requests of the tier it admits next, one of the account holding the fewest of its sequences;
 * and an account with a request waiting and no sequence at all takes one from the account holding
 * the most, which keeps at least one. Without an account (tests, the engine alone) the prefix-cache
 * namespace stands in.
 */

const accountOf = (r: EngineRequest) => r.spec.account ?? r.spec.cacheNamespace ?? "";

/** Sequences each account holds on the shard. */
function heldByAccount(running: readonly EngineRequest[]): Map<string, number> {
  const held = new Map<string, number>();
  for (const r of running) held.set(accountOf(r), (held.get(accountOf(r)) ?? 0) + 1);
  return held;
}

/** Of `head`'s tier, the first waiting request (in queue order) of the account holding the fewest sequences. */
export function fairestOf(head: EngineRequest, waiting: readonly EngineRequest[], running: readonly EngineRequest[]): EngineRequest {
  if (head.abortRequested) return head; // admit() ends it at once
  const held = heldByAccount(running);
  let best = head;
  for (const r of waiting) {
    if (r.tier === head.tier && !r.abortRequested && (held.get(accountOf(r)) ?? 0) < (held.get(accountOf(best)) ?? 0)) best = r;
  }
  return best;
}

/**
 * Running requests to preempt for the first waiting request whose account holds no sequence: the
 * ones (paused first, then latest admitted) of the account holding the most, of the same tier or a
 * lower one, if it keeps at least one and they free all the sequences the request needs.
 */
export function fairShareVictims(
  running: readonly EngineRequest[],
  waiting: readonly EngineRequest[],
  freeSequences: number,
  needed: (r: EngineRequest) => number,
): EngineRequest[] {
  const held = heldByAccount(running);
  const starved = waiting.find((r) => !r.abortRequested && !held.has(accountOf(r)));
  if (!starved) return [];
  const need = needed(starved) - freeSequences;
  if (need <= 0) return [];
  const candidates = running.filter((r) => !r.abortRequested && RANK[r.tier] >= RANK[starved.tier]);
  const [account] = [...heldByAccount(candidates)].sort((a, b) => b[1] - a[1])[0] ?? [];
  if (account === undefined || held.get(account)! - need < 1) return [];
  const victims = candidates
    .filter((r) => accountOf(r) === account)
    .sort((a, b) => Number(b.paused) - Number(a.paused) || b.admittedAt - a.admittedAt);
  return victims.length >= need ? victims.slice(0, need) : [];
}
