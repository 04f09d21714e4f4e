import { RequestOutput, type TokenTexts } from "./output.js";
import type { SchedulingPolicy } from "./policy.js";
import type { EngineRequest } from "./request.js";
import { SequenceTable } from "./sequences.js";
import { noteProgress, StalledError, stallCheckMs, stalledRequests } from "./stall.js";
import { StepPlan } from "./step-plan.js";
import type { MemoryOp } from "../runner/step-protocol.js";
import type { FinishReason, ModelHostStats } from "../types.js";

export class QueueFullError extends Error {}
export class WaitExpiredError extends Error {}
export { StalledError };

export interface ShardStats extends Pick<ModelHostStats, "running" | "waiting" | "preemptions"> {
  sequences: number;
  paused: number;
  usedCells: number;
  totalCells: number;
}

/**
 * A shard's scheduler, after vLLM v1's: every step it settles aborts, preempts for waiting
 * higher tiers, admits what fits, and fills the batch under a token budget, running decodes first
 * (in tier order), then prompt chunks (priority prompts first). Every change of a request's state
 * (admitted, preempted, finished) happens here.
 */
export class ShardScheduler {
  readonly waiting: EngineRequest[] = [];
  readonly running: EngineRequest[] = [];
  private readonly outputs = new Map<EngineRequest, RequestOutput>();
  private readonly sequences: SequenceTable;
  private pendingOps: MemoryOp[] = [];
  private pendingFrees: number[] = [];
  private preemptions = 0;
  private lastPlan: StepPlan | undefined;

  constructor(
    private readonly options: { sequences: number; cellsPerSequence: number; stepTokens: number; prefixCache: boolean; stallTimeoutMs: number },
    private readonly policy: SchedulingPolicy,
    private readonly texts: TokenTexts,
    /** Takes a new request waiting on another shard, when this one has room and nothing waiting. */
    private readonly steal: () => EngineRequest | undefined,
  ) {
    this.sequences = new SequenceTable(options.sequences, options.cellsPerSequence, options.prefixCache);
  }

  /** Sequences this shard has in all. */
  get sequenceCount(): number {
    return this.sequences.size;
  }

  get freeSequences(): number {
    return this.sequences.free;
  }

  /** How much of a prompt this shard's idle cache holds for the namespace. */
  cachedPrefix(request: EngineRequest): number {
    return this.sequences.bestPrefix(request.spec.cacheNamespace, request.tokens);
  }

  enqueue(request: EngineRequest): void {
    this.waiting.push(request);
    this.waiting.sort(this.policy.compareWaiting);
  }

  /** Takes a waiting request off this shard (stolen, expired); false if it is not waiting here. */
  remove(request: EngineRequest): boolean {
    const at = this.waiting.indexOf(request);
    if (at === -1) return false;
    this.waiting.splice(at, 1);
    return true;
  }

  schedule(): StepPlan {
    const plan = new StepPlan();
    // The step planned last has run by now. Before the pending operations are taken, so the cells
    // of a sequence a stalled request frees are cleared in this step.
    if (this.lastPlan) noteProgress(this.running, this.lastPlan, this.options.stepTokens);
    for (const [request, error] of stalledRequests(this.running, this.options.stallTimeoutMs)) this.fail(request, error);
    plan.ops.push(...this.pendingOps.splice(0));
    plan.freeSamplers.push(...this.pendingFrees.splice(0));
    for (const request of this.running.filter((r) => r.abortRequested)) this.finish(request, "cancelled", plan.ops, plan.freeSamplers);
    for (const request of this.policy.victims(this.running, this.waiting, this.sequences.free)) this.preempt(request, plan.ops);
    this.admit(plan);
    this.copyPrompts(plan);
    this.fillBatch(plan);
    this.lastPlan = plan;
    return plan;
  }

  /** How often a shard with running requests but an empty batch looks for stalled ones. */
  get stallCheckMs(): number {
    return stallCheckMs(this.options.stallTimeoutMs);
  }

  /** Post-processing of one sampled token; the request may finish. */
  onSampled(request: EngineRequest, token: number, logprob: Parameters<RequestOutput["accept"]>[1]): void {
    if (request.status !== "running") return;
    if (token < 0) return this.fail(request, new Error("the request's sampler could not be built"));
    request.tokens.push(token);
    const output = this.outputs.get(request)!;
    const { events, finish } = output.accept(token, logprob, this.options.cellsPerSequence - request.tokens.length);
    for (const event of events) request.events.push(event);
    if (finish) this.finish(request, finish, this.pendingOps, this.pendingFrees);
  }

  /** Ends a request with an error (its generator throws it). */
  fail(request: EngineRequest, error: Error): void {
    if (request.status === "finished") return;
    if (request.status === "running") this.release(request, false, this.pendingOps, this.pendingFrees);
    else this.remove(request);
    request.status = "finished";
    this.outputs.delete(request);
    request.events.fail(error);
  }

  stats(): ShardStats {
    const count = (list: EngineRequest[]) => ({
      priority: list.filter((r) => r.schedulingClass === "priority").length,
      standard: list.filter((r) => r.schedulingClass === "standard").length,
      flex: list.filter((r) => r.schedulingClass === "flex").length,
    });
    const computed = new Map(this.running.map((r) => [r.sequence!, r.computed]));
    return {
      sequences: this.sequences.size,
      running: count(this.running),
      waiting: count(this.waiting),
      preemptions: this.preemptions,
      paused: this.running.filter((r) => r.paused).length,
      usedCells: this.sequences.usedCells(computed),
      totalCells: this.sequences.size * this.options.cellsPerSequence,
    };
  }

  private admit(plan: StepPlan): void {
    while (this.sequences.free > 0) {
      const request = this.waiting[0] ?? this.steal();
      if (!request) return;
      if (request.abortRequested) {
        this.remove(request);
        this.endWaiting(request);
        continue;
      }
      const group = [request, ...request.siblings.filter((s) => s.status === "waiting" && !s.started && !s.abortRequested)];
      // The choices of one request are admitted together or not at all, and nobody passes them.
      if (group.length > this.sequences.free) return;
      for (const member of group) {
        this.remove(member);
        this.start(member, plan);
      }
      for (const sibling of group.slice(1)) sibling.copyFrom = request;
    }
  }

  private start(request: EngineRequest, plan: StepPlan): void {
    const taken = this.sequences.take(request.spec.cacheNamespace, request.tokens, plan.ops);
    request.sequence = taken.sequence;
    request.computed = taken.reused;
    request.status = "running";
    request.admittedAt = performance.now();
    request.progressAt = request.admittedAt;
    this.running.push(request);
    if (!request.samplerBuilt) {
      plan.newSamplers.push({ id: request.id, spec: request.sampler });
      request.samplerBuilt = true;
    }
    if (!request.started) {
      request.started = true;
      this.outputs.set(request, new RequestOutput(this.texts, request.spec));
      request.events.push({ type: "started", queuedMs: performance.now() - request.arrivedAt, cachedTokens: taken.reused });
    }
  }

  /**
   * A sibling whose leader has computed all of the prompt but its last token takes a copy of
   * those cells, and from then on is a request like any other. If the leader stopped first, the
   * sibling computes the prompt itself.
   */
  private copyPrompts(plan: StepPlan): void {
    for (const request of this.running) {
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

  /** A leader stops before its prompt's last token until its siblings have their copy. */
  private limit(request: EngineRequest): number {
    const waitingForCopy = request.siblings.some((s) => s.copyFrom === request);
    return waitingForCopy ? Math.max(0, request.promptLength - 1 - request.computed) : request.pending;
  }

  private fillBatch(plan: StepPlan): void {
    let budget = this.options.stepTokens;
    const ordered = this.running.slice().sort(this.policy.compareRunning);
    // Decodes first: one token each keeps every stream moving; prompts catch up in what is left.
    const ready = ordered.filter((r) => r.copyFrom === undefined && !r.paused);
    for (const request of ready) {
      if (request.pending !== 1 || budget === 0) continue;
      plan.add(request, 1);
      budget--;
    }
    for (const request of ready) {
      if (request.pending <= 1 || budget === 0) continue;
      const count = Math.min(this.limit(request), budget);
      if (count === 0) continue;
      plan.add(request, count);
      budget -= count;
    }
  }

  private preempt(request: EngineRequest, ops: MemoryOp[]): void {
    this.release(request, false, ops, undefined);
    request.copyFrom = undefined;
    request.status = "waiting";
    request.resumed = true;
    request.computed = 0;
    this.preemptions++;
    request.events.push({ type: "preempted" });
    this.enqueue(request);
  }

  private finish(request: EngineRequest, reason: FinishReason, ops: MemoryOp[], frees: number[]): void {
    if (request.status !== "running") return;
    // The cells of every computed token stay for the namespace's next prompts.
    this.release(request, true, ops, frees);
    request.status = "finished";
    for (const event of this.outputs.get(request)!.finish(reason)) request.events.push(event);
    this.outputs.delete(request);
    request.events.close();
  }

  /**
   * Ends a waiting request whose caller went away: one that never ran has nothing to report; a
   * preempted one still reports what it generated.
   */
  endWaiting(request: EngineRequest, reason?: unknown): void {
    if (request.status !== "waiting") return;
    this.remove(request);
    request.status = "finished";
    if (request.samplerBuilt) this.pendingFrees.push(request.id);
    const output = this.outputs.get(request);
    this.outputs.delete(request);
    if (!output) return request.events.fail(reason ?? new Error("aborted"));
    for (const event of output.finish("cancelled")) request.events.push(event);
    request.events.close();
  }

  private release(request: EngineRequest, keep: boolean, ops: MemoryOp[], frees: number[] | undefined): void {
    this.running.splice(this.running.indexOf(request), 1);
    this.sequences.give(request.sequence!, keep ? request.tokens.slice(0, request.computed) : undefined, ops);
    request.sequence = undefined;
    if (frees) {
      frees.push(request.id);
      request.samplerBuilt = false;
    }
  }
}
