import { fairestOf, fairShareVictims } from "./fairness.js";
import type { EngineRequest } from "./request.js";
import { TIER_RANK as RANK, type ServiceTier } from "../../protocol/tiers.js";

/**
 * Who is admitted first, who gives way, and in what order a step's batch is filled: the one place
 * tiers and fairness live. The scheduler asks; it has no tier branches of its own.
 */
export interface SchedulingPolicy {
  /** Sorts a waiting queue by tier and age. */
  compareWaiting(a: EngineRequest, b: EngineRequest): number;
  /** Sorts running requests for the batch: earlier ones get their tokens first. */
  compareRunning(a: EngineRequest, b: EngineRequest): number;
  /** The waiting request to admit next: the queue's head, unless a starving tier's reserved share says otherwise. */
  nextToAdmit(waiting: readonly EngineRequest[], running: readonly EngineRequest[], sequences: number): EngineRequest | undefined;
  /** Running requests to preempt so that waiting ones are not held back by lower tiers. */
  victims(running: readonly EngineRequest[], waiting: readonly EngineRequest[], freeSequences: number, sequences: number): EngineRequest[];
  /** `admitted` was admitted ahead of `waiting`, which keeps waiting (the policy may age it). */
  passedOver(admitted: EngineRequest, waiting: EngineRequest): void;
}

/**
 * Admissions of priority requests a waiting standard request lets pass before it is starving: from
 * then on it goes ahead of priority to a reserved sequence, and priority does not preempt it there.
 */
export const STANDARD_AGING_ADMISSIONS = 4;

/**
 * Sequences of a shard reserved for starving standard requests: an eighth, at least one. The cap
 * bounds standard's wait under a continuous priority stream (one generation per reserved sequence
 * at a time) without letting a backlog of starving standard requests go ahead of priority, which
 * would make priority wait behind all of them.
 */
export const standardReserve = (sequences: number) => Math.max(1, Math.floor(sequences / 8));

const live = (list: readonly EngineRequest[], tier: ServiceTier) => list.filter((r) => r.tier === tier && !r.abortRequested);
const starving = (r: EngineRequest) => r.tier === "default" && r.overtaken >= STANDARD_AGING_ADMISSIONS;
/** Starving standard requests running on the reserved sequences: the oldest admitted, up to the reserve. */
const onReserve = (running: readonly EngineRequest[], sequences: number) =>
  live(running, "default")
    .filter(starving)
    .sort((a, b) => a.admittedAt - b.admittedAt)
    .slice(0, standardReserve(sequences));

/** Running lower-tier requests a priority request could preempt: flex, and standard not on the reserve. */
export const preemptibleByPriority = (running: readonly EngineRequest[], sequences: number) => {
  const kept = onReserve(running, sequences);
  return running.filter((r) => r.tier !== "priority" && !r.abortRequested && !kept.includes(r)).length;
};

/**
 * A priority request's prompt is loading (admitted, its first token not yet sampled) and the rest of
 * it fits a step of `stepTokens`: its shard wants every core for that step (core/shard-group.ts).
 */
export const loadingPriorityPrompt = (running: readonly EngineRequest[], stepTokens: number) =>
  running.some(
    (r) => r.tier === "priority" && !r.paused && r.tokens.length === r.promptLength && r.promptLength - r.computed <= stepTokens,
  );

/** A priority request runs or waits (and its client reads): the shard's steps are what it waits for. */
export const servesPriority = (running: readonly EngineRequest[], waiting: readonly EngineRequest[]) =>
  running.some(readingPriority) || waiting.some(readingPriority);
const readingPriority = (r: EngineRequest) => r.tier === "priority" && !r.paused;

/** Priority requests wait with no free sequence and no lower tier left to preempt: priority's own load fills the shard. */
export const prioritySaturated = (
  running: readonly EngineRequest[],
  waiting: readonly EngineRequest[],
  freeSequences: number,
  sequences: number,
) => waiting.some((r) => r.tier === "priority") && freeSequences === 0 && preemptibleByPriority(running, sequences) === 0;

/** Sequences a waiting request needs to be admitted: itself and the choices admitted with it. */
export const sequencesNeeded = (r: EngineRequest) =>
  1 + r.siblings.filter((s) => s.status === "waiting" && !s.started && !s.abortRequested).length;

/**
 * Service tiers: priority, then standard ("default"), then flex, then batch lines, each oldest first
 * (a preempted request ahead of new ones of its tier). Batch runs only on capacity nobody else waits for: any
 * waiting priority, standard or flex request takes the batch sequences admitted last, before any
 * flex one is touched. Flex likewise gives way to waiting priority or standard
 * requests (the flex sequences admitted last), and priority requests that still
 * have to wait take the standard ones admitted last, so priority work never waits for a whole
 * generation to end. Needs are counted in sequences: a request with `n` choices needs `n`.
 * Standard is never starved: after STANDARD_AGING_ADMISSIONS priority admissions pass it, a waiting
 * standard request goes first to a reserved sequence (`standardReserve`) and keeps it. Within a
 * tier, accounts share the shard (core/fairness.ts): the account holding fewest sequences is
 * admitted first, and one holding none takes a sequence from the one holding most.
 */
export const tieredPolicy: SchedulingPolicy = {
  compareWaiting(a, b) {
    return RANK[a.tier] - RANK[b.tier] || Number(b.resumed) - Number(a.resumed) || a.arrivedAt - b.arrivedAt;
  },
  compareRunning(a, b) {
    return RANK[a.tier] - RANK[b.tier] || a.admittedAt - b.admittedAt;
  },
  nextToAdmit(waiting, running, sequences) {
    const head = waiting[0];
    if (!head) return undefined;
    if (head.tier !== "priority" || onReserve(running, sequences).length >= standardReserve(sequences))
      return fairestOf(head, waiting, running);
    return waiting.find((r) => starving(r) && !r.abortRequested) ?? fairestOf(head, waiting, running);
  },
  victims(running, waiting, freeSequences, sequences) {
    const need = (tier: ServiceTier) => live(waiting, tier).reduce((sum, r) => sum + sequencesNeeded(r), 0);
    const priority = need("priority");
    const defaultTier = need("default");
    const flex = need("flex");
    const kept = onReserve(running, sequences);
    // Starving standard requests take the reserved sequences they lack, ahead of priority.
    const reserveGap = Math.min(standardReserve(sequences) - kept.length, waiting.filter((r) => starving(r) && !r.abortRequested).length);
    const latestFirst = (tier: ServiceTier) =>
      live(running, tier)
        .filter((r) => !kept.includes(r) && !(reserveGap > 0 && starving(r)))
        .sort((a, b) => b.admittedAt - a.admittedAt);
    const chosen: EngineRequest[] = [];
    let covered = freeSequences;
    for (const [candidates, wanted] of [
      [latestFirst("batch"), priority + defaultTier + flex],
      [latestFirst("flex"), priority + defaultTier],
      [latestFirst("default"), priority + Math.max(0, reserveGap)],
    ] as const) {
      for (const request of candidates) {
        if (covered >= wanted) break;
        chosen.push(request);
        covered++;
      }
    }
    // No tier gives way this step: an account holding no sequence may take one from another.
    return chosen.length > 0
      ? chosen
      : fairShareVictims(
          running.filter((r) => !kept.includes(r)),
          waiting,
          freeSequences,
          sequencesNeeded,
        );
  },
  passedOver(admitted, waiting) {
    if (admitted.tier === "priority" && waiting.tier === "default") waiting.overtaken++;
  },
};
