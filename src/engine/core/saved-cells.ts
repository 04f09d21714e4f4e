import type { EngineRequest } from "./request.js";
import type { StepPlan } from "./step-plan.js";
import type { MemoryOp, StepReply } from "../runner/step-protocol.js";

/** Cells worth saving: fewer are computed again faster than they are copied out and back. */
const MIN_SAVED_CELLS = 16;

/**
 * Preempted requests' cells, kept in the runner's memory (llama.cpp's per-sequence state) until they
 * are readmitted, so a preempted request resumes from its computed cells instead of computing
 * them again. At most `limit` cells are kept per shard (one sequence's worth): past that, a
 * preempted request computes its tokens again. Restoring takes a step of its own: the request
 * joins the batch once the runner has said its cells are back.
 */
export class SavedCells {
  private total = 0;

  constructor(private readonly limit: number) {}

  /** Before a running request gives its sequence up: saves its cells if they are worth it and fit. */
  save(request: EngineRequest, ops: MemoryOp[]): void {
    if (request.computed < MIN_SAVED_CELLS || this.total + request.computed > this.limit) return;
    ops.push({ op: "save", seq: request.sequence!, key: request.id });
    request.savedCells = request.computed;
    this.total += request.computed;
  }

  /**
   * A readmitted request on the sequence it was given, `reused` of its cells already there: if its
   * saved cells hold more, they are restored this step (the request sits out the batch until then).
   */
  resume(request: EngineRequest, reused: number, plan: StepPlan): void {
    const cells = request.savedCells;
    if (cells === 0) return;
    this.forget(request, plan.ops, cells > reused ? "restore" : "forget");
    if (cells <= reused) return;
    request.restoring = cells;
    request.computed = 0;
    plan.restores.push(request);
  }

  /** A request that will not run again drops its saved cells. */
  drop(request: EngineRequest, ops: MemoryOp[]): void {
    if (request.savedCells > 0) this.forget(request, ops, "forget");
  }

  /** The runner's word on this step's restores: each request computes on from its cells, or from nothing. Returns the cells restored. */
  confirm(plan: StepPlan, reply: StepReply): number {
    let restored = 0;
    for (const request of plan.restores) {
      if (request.status === "running" && !reply.failedRestores.includes(request.id)) {
        request.computed = request.restoring;
        restored += request.restoring;
      }
      request.restoring = 0;
    }
    return restored;
  }

  private forget(request: EngineRequest, ops: MemoryOp[], op: "restore" | "forget"): void {
    ops.push(op === "restore" ? { op, seq: request.sequence!, key: request.id } : { op, key: request.id });
    this.total -= request.savedCells;
    request.savedCells = 0;
  }
}
