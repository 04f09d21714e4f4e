import type { EngineRequest } from "./request.js";
import type { StepPlan } from "./step-plan.js";

/**
 * A sibling whose leader has computed all of the prompt but its last token takes a copy of
 * those cells, and from then on is a request like any other. If the leader stopped first, the
 * sibling computes the prompt itself.
 */
export function copyPrompts(running: readonly EngineRequest[], plan: StepPlan): void {
  for (const request of running) {
    const leader = request.copyFrom;
    if (!leader) continue;
    if (leader.status !== "running") {
      request.copyFrom = undefined;
      continue;
    }
    if (leader.computed < leader.promptLength - 1) continue;
    plan.ops.push({ op: "cp", src: leader.sequence!, dst: request.sequence! });
    request.computed = leader.promptLength - 1;
    request.copyFrom = undefined;
  }
}

/** Tokens a request may compute this step: a leader stops before its prompt's last token until its siblings have their copy. */
export function computableTokens(request: EngineRequest): number {
  const waitingForCopy = request.siblings.some((s) => s.copyFrom === request);
  return waitingForCopy ? Math.max(0, request.promptLength - 1 - request.computed) : request.pending;
}
