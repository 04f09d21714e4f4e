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
}

const RANK: Record<SchedulingClass, number> = { priority: 0, standard: 1, flex: 2 };

/**
 * Service tiers: priority, then standard, then flex, each oldest first (a preempted request ahead
 * of new ones of its class). Flex runs only on capacity nobody else waits for: a priority or
 * standard request that has to wait takes the flex sequence admitted last, and a priority request
 * that still has to wait takes the standard one admitted last, so priority work never waits for a
 * whole generation to end.
 */
export const tieredPolicy: SchedulingPolicy = {
  compareWaiting(a, b) {
    return RANK[a.schedulingClass] - RANK[b.schedulingClass] || Number(b.resumed) - Number(a.resumed) || a.arrivedAt - b.arrivedAt;
  },
  compareRunning(a, b) {
    return RANK[a.schedulingClass] - RANK[b.schedulingClass] || a.admittedAt - b.admittedAt;
  },
  victims(running, waiting, freeSequences) {
    const priority = waiting.filter((r) => r.schedulingClass === "priority").length;
    const standard = waiting.filter((r) => r.schedulingClass === "standard").length;
    const latestFirst = (schedulingClass: SchedulingClass) =>
      running.filter((r) => r.schedulingClass === schedulingClass && !r.abortRequested).sort((a, b) => b.admittedAt - a.admittedAt);
    const chosen: EngineRequest[] = [];
    let covered = freeSequences;
    for (const [candidates, need] of [
      [latestFirst("flex"), priority + standard],
      [latestFirst("standard"), priority],
    ] as const) {
      for (const request of candidates) {
        if (covered >= need) break;
        chosen.push(request);
        covered++;
      }
    }
    return chosen;
  },
};
