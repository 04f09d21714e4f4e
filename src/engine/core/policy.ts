import type { EngineRequest } from "./request.js";
import type { SchedulingClass } from "../types.js";

/**
 * Who is admitted first, who gives way, and in what order a step's batch is filled: the one place
 * tiers and fairness live. The scheduler asks; it has no tier branches of its own.
 */
export interface SchedulingPolicy {
  /** Sorts a waiting queue: the head is admitted next. */
  compareWaiting(a: EngineRequest, b: EngineRequest): number;
  /** Sorts running requests for the batch: earlier ones get their tokens first. */
  compareRunning(a: EngineRequest, b: EngineRequest): number;
  /** Running requests to preempt so that waiting ones are not held back by lower tiers. */
  victims(running: readonly EngineRequest[], waiting: readonly EngineRequest[], freeSequences: number): EngineRequest[];
  /** `admitted` was admitted ahead of `waiting`, which keeps waiting (the policy may age it). */
  passedOver(admitted: EngineRequest, waiting: EngineRequest): void;
}

const RANK: Record<SchedulingClass, number> = { priority: 0, standard: 1, flex: 2, batch: 3 };

/**
 * Admissions of priority requests a waiting standard request lets pass before it goes first: the
 * bound on standard's wait under a continuous priority stream (a guaranteed minimum share).
 */
export const STANDARD_AGING_ADMISSIONS = 4;

/** A standard request passed over often enough ranks with priority, and priority does not preempt it. */
const aged = (r: EngineRequest) => r.schedulingClass === "standard" && r.overtaken >= STANDARD_AGING_ADMISSIONS;
const rank = (r: EngineRequest) => (aged(r) ? RANK.priority : RANK[r.schedulingClass]);

/** Sequences a waiting request needs to be admitted: itself and the choices admitted with it. */
export const sequencesNeeded = (r: EngineRequest) => 1 + r.siblings.filter((s) => s.status === "waiting" && !s.started && !s.abortRequested).length;

/**
 * Service tiers: priority, then standard, then flex, then batch lines, each oldest first (a preempted
 * request ahead of new ones of its class). Batch runs only on capacity nobody else waits for: any
 * waiting priority, standard or flex request takes the batch sequences admitted last, before any
 * flex one is touched. Flex likewise gives way to waiting priority or standard
 * requests (the flex sequences admitted last), and priority requests that still
 * have to wait take the standard ones admitted last, so priority work never waits for a whole
 * generation to end. Needs are counted in sequences: a request with `n` choices needs `n`.
 * Standard is never starved: after STANDARD_AGING_ADMISSIONS priority admissions pass it, a
 * waiting standard request goes first and keeps its sequence.
 */
export const tieredPolicy: SchedulingPolicy = {
  compareWaiting(a, b) {
    return rank(a) - rank(b) || Number(b.resumed) - Number(a.resumed) || a.arrivedAt - b.arrivedAt;
  },
  compareRunning(a, b) {
    return RANK[a.schedulingClass] - RANK[b.schedulingClass] || a.admittedAt - b.admittedAt;
  },
  victims(running, waiting, freeSequences) {
    const need = (schedulingClass: SchedulingClass) =>
      waiting.filter((r) => r.schedulingClass === schedulingClass && !r.abortRequested).reduce((sum, r) => sum + sequencesNeeded(r), 0);
    const priority = need("priority");
    const standard = need("standard");
    const flex = need("flex");
    const latestFirst = (schedulingClass: SchedulingClass) =>
      running.filter((r) => r.schedulingClass === schedulingClass && !r.abortRequested && !aged(r)).sort((a, b) => b.admittedAt - a.admittedAt);
    const chosen: EngineRequest[] = [];
    let covered = freeSequences;
    for (const [candidates, wanted] of [
      [latestFirst("batch"), priority + standard + flex],
      [latestFirst("flex"), priority + standard],
      [latestFirst("standard"), priority],
    ] as const) {
      for (const request of candidates) {
        if (covered >= wanted) break;
        chosen.push(request);
        covered++;
      }
    }
    return chosen;
  },
  passedOver(admitted, waiting) {
    if (admitted.schedulingClass === "priority" && waiting.schedulingClass === "standard") waiting.overtaken++;
  },
};
