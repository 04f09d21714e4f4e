import { StepCostModel } from "./cost-model.js";
import { computableTokens, copyPrompts } from "./choices.js";
import { admissible, pausedCount, pausedPastGrace, untilGraceEnds } from "./paused.js";
import { RequestOutput, type TokenTexts } from "./output.js";
import { loadingPriorityPrompt, prioritySaturated, servesPriority, type SchedulingPolicy } from "./policy.js";
import type { EngineRequest } from "./request.js";
import { SavedCells } from "./saved-cells.js";
import { RequestSpeculation, ShardSpeculation } from "./speculation.js";
import { SequenceTable } from "./sequences.js";
import { countByTier, type ShardSchedulerOptions, type ShardStats } from "./scheduler-types.js";
import { budgetOptions, fillBatch, type StepBudget } from "./step-budget.js";
import { noteProgress, StalledError, stallCheckMs, stalledRequests } from "./stall.js";
import { StepPlan } from "./step-plan.js";
import { AdapterTurns } from "./adapter-turns.js";
import { UNCAPPED, type ModelCap } from "./sequence-cap.js";
import type { Draft } from "./drafter.js";
import { takeRun, type SampledRun } from "./verified-run.js";
import type { MemoryOp, StepReply } from "../runner/step-protocol.js";
import type { FinishReason } from "../types.js";

export { StalledError };

export type { ShardSchedulerOptions, ShardStats };

/**
 * A shard's scheduler, after vLLM v1's: every step it settles aborts, preempts for waiting
 * higher tiers and requests paused past their grace period (core/paused.ts), admits what fits, and fills the batch under a time budget (core/step-budget.ts),
 * running decodes first (in tier order), then prompt chunks (priority prompts first). Every change
 * of a request's state (queued, admitted, computed, preempted, finished, moved to another shard)
 * happens here: the router and the step loop call these methods, as vLLM's `finish_requests`.
 */
export class ShardScheduler {
  readonly waiting: EngineRequest[] = [];
  readonly running: EngineRequest[] = [];
  private readonly outputs = new Map<EngineRequest, RequestOutput>();
  private readonly sequences: SequenceTable;
  private readonly saved: SavedCells;
  private pendingOps: MemoryOp[] = [];
  private pendingFrees: number[] = [];
  private preemptions = 0;
  private lastBudget: StepBudget = { ms: null, tokens: 0, plannedMs: 0 };
  private lastPlan: StepPlan | undefined;
  /** This shard's speculative decoding: its mode and measured acceptance. */
  readonly drafting: ShardSpeculation;
  /** Which LoRA adapter's requests run in a step, when several run here (core/adapter-turns.ts). */
  private readonly adapterTurns = new AdapterTurns();

  constructor(
    private readonly options: ShardSchedulerOptions,
    private readonly policy: SchedulingPolicy,
    private readonly texts: TokenTexts,
    /** This shard's step times, learnt by its step loop. */
    readonly cost: StepCostModel = new StepCostModel(),
    /** Takes a new request waiting on another shard, when this one has room and nothing waiting. */
    private readonly steal: () => EngineRequest | undefined = () => undefined,
    /** The model's cap on running requests over all its shards (core/sequence-cap.ts). */
    private readonly cap: ModelCap = UNCAPPED,
  ) {
    this.sequences = new SequenceTable(options.sequences, options.cellsPerSequence, options.prefixCache);
    this.saved = new SavedCells(options.cellsPerSequence);
    this.drafting = new ShardSpeculation(options.speculation ?? "off");
  }

  /** Sequences this shard has in all. */
  get sequenceCount(): number {
    return this.sequences.size;
  }

  /** Its share of the model's sequences: what placement balances by (shards may hold more, for adapters). */
  get share(): number {
    return this.options.share ?? this.sequences.size;
  }

  /** Sequences a request may be admitted to now: free here, and within the model's cap. */
  get freeSequences(): number {
    return Math.min(this.sequences.free, this.cap.free);
  }

  /** How much of a prompt this shard's idle cache holds for the namespace. */
  cachedPrefix(request: EngineRequest): number {
    return this.sequences.bestPrefix(request.spec.cacheNamespace, request.tokens);
  }

  /**
   * A priority request's prompt is loading here (admitted, its first token not yet sampled) and the
   * rest of it fits one step: the shard wants every core for that step (core/shard.ts holds the
   * others). A longer prompt loads on the shard's own cores, so no other shard waits for it long.
   */
  get rushing(): boolean {
    return loadingPriorityPrompt(this.running, this.options.stepTokens);
  }

  /** A priority stream runs here: this shard's steps are what it waits for, so they never hold. */
  get servingPriority(): boolean {
    return servesPriority(this.running, this.waiting);
  }

  /** When a priority request last ran or waited here. */
  lastPriorityAt = -Infinity;

  /** Queues a request (with the choices admitted with it) on this shard. */
  enqueue(request: EngineRequest): void {
    request.shard = this.options.shard ?? 0;
    for (const sibling of request.siblings) sibling.shard = request.shard;
    this.waiting.push(request);
    this.waiting.sort(this.policy.compareWaiting);
  }

  /**
   * A request to move to an idle shard: one that never ran (a preempted one keeps its sampler
   * here) and has no choices with it, and only if this shard has no room for all it has waiting:
   * one with room admits them at its next step, and a request placed here for its cached prefix
   * would lose the cache by moving.
   */
  giveAway(): EngineRequest | undefined {
    if (this.freeSequences >= admissible(this.waiting).length) return undefined;
    const request = this.waiting.find((r) => !r.resumed && !r.started && r.siblings.length === 0 && !r.abortRequested);
    if (request) this.remove(request);
    return request;
  }

  /** Takes back a request that waits here and never ran, to queue it elsewhere (core/adapter-moves.ts). */
  withdraw(request: EngineRequest): boolean {
    return request.status === "waiting" && !request.started && this.remove(request);
  }

  /** A request another shard moved here (core/adapter-moves.ts), with its output: it waits here ahead of new requests of its tier. */
  takeOver(request: EngineRequest, output: RequestOutput): void {
    this.outputs.set(request, output);
    request.speculation?.moveTo(this.drafting);
    this.enqueue(request);
  }

  /** The caller went away: a waiting request ends now, a running one at the next step. */
  abort(request: EngineRequest, reason: unknown): void {
    request.abortRequested = true;
    if (request.status === "waiting") this.endWaiting(request, reason);
  }

  /**
   * Its caller cannot take output now (paused: out of every batch, and preempted past the grace
   * period), or can again (its stall clock restarts; preempted, it may be admitted again).
   */
  setPaused(request: EngineRequest, paused: boolean): void {
    if (request.paused === paused) return;
    request.paused = paused;
    if (paused) request.pausedAt = performance.now();
    else request.progressAt = performance.now();
  }

  /** A flex request still waiting for its first admission when its wait limit ends. */
  expire(request: EngineRequest, reason: Error): void {
    if (request.status !== "waiting" || request.started) return;
    this.remove(request);
    request.status = "finished";
    request.events.fail(reason);
  }

  /** The budget of the last planned step. */
  get budget(): StepBudget {
    return this.lastBudget;
  }

  /** `priorityNearby`: a priority request ran or waited on one of the model's shards a moment ago (shard-group.ts). */
  schedule(priorityNearby = false): StepPlan {
    const plan = new StepPlan();
    // The step planned last has run by now. Before the pending operations are taken, so the cells
    // of a sequence a stalled request frees are cleared in this step.
    if (this.lastPlan) noteProgress(this.running, this.lastPlan, this.options.stepTokens);
    for (const [request, error] of stalledRequests(this.running, this.options.stallTimeoutMs ?? Infinity)) this.fail(request, error);
    plan.ops.push(...this.pendingOps.splice(0));
    plan.freeSamplers.push(...this.pendingFrees.splice(0));
    for (const request of this.running.filter((r) => r.abortRequested)) this.finish(request, "cancelled", plan.ops, plan.freeSamplers);
    for (const request of this.running.filter((r) => r.moveTo !== undefined)) this.moveAway(request, plan);
    for (const request of pausedPastGrace(this.running, this.options.pausedPreemptMs ?? Infinity)) this.preempt(request, plan.ops);
    for (const request of this.policy.victims(this.running, admissible(this.waiting), this.freeSequences, this.sequences.size))
      this.preempt(request, plan.ops);
    this.admit(plan);
    copyPrompts(this.running, plan);
    // A sibling waiting for its copy of the prompt, a request waiting for its cells back, or one
    // whose caller is not reading (paused) sits out.
    const runnable = this.running
      .filter((r) => r.copyFrom === undefined && r.restoring === 0 && !r.paused)
      .sort(this.policy.compareRunning);
    if (servesPriority(this.running, this.waiting)) this.lastPriorityAt = performance.now();
    // One adapter's requests a step: the others wait their turn (counted as progress, as in a full batch).
    const { chosen: ordered, leftOut } = this.adapterTurns.choose(runnable);
    plan.adapter = ordered[0]?.adapter?.handle ?? 0n;
    const budget = fillBatch(
      plan,
      ordered,
      { ...budgetOptions(this.options), exploreDrafts: this.drafting.exploring, draftCeiling: this.drafting.draftCeiling, priorityNearby },
      this.cost,
      computableTokens,
    );
    plan.otherAdaptersWait = leftOut;
    if (leftOut) plan.full = true;
    if (plan.batchSize > 0) this.drafting.planned();
    if (plan.batchSize > 0) this.lastBudget = budget;
    this.lastPlan = plan;
    return plan;
  }

  /**
   * How long a shard with an empty batch may sleep before it schedules again: with requests running,
   * until it looks for stalled ones or a paused one's grace period ends (undefined: until woken).
   */
  get nextCheckMs(): number | undefined {
    if (this.running.length === 0) return undefined;
    return Math.min(
      stallCheckMs(this.options.stallTimeoutMs ?? Infinity),
      untilGraceEnds(this.running, this.options.pausedPreemptMs ?? Infinity) ?? Infinity,
    );
  }

  /**
   * Takes the runner's reply to a planned step (vLLM's `update_from_output`): advances what each
   * request has computed and post-processes the sampled tokens. Returns the prompt tokens computed
   * and the cells of preempted requests restored.
   */
  update(plan: StepPlan, reply: StepReply): { promptTokens: number; restoredCells: number } {
    const restoredCells = this.saved.confirm(plan, reply);
    if (reply.error !== undefined) {
      for (const { request } of plan.scheduled) this.fail(request, new Error(`The engine failed to decode a batch: ${reply.error}`));
      return { promptTokens: 0, restoredCells };
    }
    let promptTokens = 0;
    for (const { request, count } of plan.scheduled) {
      promptTokens += Math.min(count, Math.max(0, request.promptLength - request.computed));
      if (request.status === "running") request.computed += count;
    }
    const failed = new Map(reply.failedSamplers.map((f) => [f.id, f.reason]));
    let at = 0;
    plan.sampled.forEach((request, i) => {
      const count = reply.counts?.[i] ?? 1;
      const sampled = { tokens: reply.tokens.subarray(at, at + count), logprobs: reply.logprobs.slice(at, at + count) };
      at += count;
      const reason = failed.get(request.id);
      if (reason !== undefined) this.fail(request, new Error(reason));
      else this.onSampled(request, sampled, plan.drafts.get(request));
    });
    return { promptTokens, restoredCells };
  }

  /** Ends a request with an error (its generator throws it). */
  fail(request: EngineRequest, error: Error): void {
    if (request.status === "finished") return;
    if (request.status === "running") this.release(request, false, this.pendingOps, this.pendingFrees);
    // A preempted request keeps its sampler in the runner while it waits: that goes too.
    else if (this.remove(request) && request.samplerBuilt) this.pendingFrees.push(request.id);
    this.saved.drop(request, this.pendingOps);
    request.status = "finished";
    this.outputs.delete(request);
    request.events.fail(error);
  }

  /** The shard's runner is gone: everything here fails. */
  failAll(error: Error): void {
    for (const request of [...this.running, ...this.waiting]) this.fail(request, error);
  }

  stats(): ShardStats {
    const computed = new Map(this.running.map((r) => [r.sequence!, r.computed]));
    return {
      sequences: this.sequences.size,
      running: countByTier(this.running),
      waiting: countByTier(admissible(this.waiting)),
      preemptions: this.preemptions,
      paused: pausedCount(this.running, this.waiting),
      usedCells: this.sequences.usedCells(computed),
      totalCells: this.sequences.size * this.options.cellsPerSequence,
      budget: this.lastBudget,
      speculation: {
        draftTokens: this.drafting.draftTokens,
        acceptedTokens: this.drafting.acceptedTokens,
        acceptanceRate: this.drafting.acceptanceRate,
      },
      prioritySaturated: prioritySaturated(this.running, admissible(this.waiting), this.freeSequences, this.sequences.size),
    };
  }

  /** Post-processing of a request's sampled run (core/verified-run.ts); the request may finish on any of its tokens. */
  private onSampled(request: EngineRequest, run: SampledRun, draft: Draft | undefined): void {
    if (request.status !== "running") return;
    if (run.tokens[0]! < 0) {
      this.fail(request, new Error("the request's sampler could not be built"));
      return;
    }
    const { finish, extraCellsFrom } = takeRun(request, this.outputs.get(request)!, run, draft, this.options.cellsPerSequence);
    if (extraCellsFrom !== undefined) this.pendingOps.push({ op: "rm", seq: request.sequence!, from: extraCellsFrom });
    if (finish) this.finish(request, finish, this.pendingOps, this.pendingFrees);
  }

  private remove(request: EngineRequest): boolean {
    const at = this.waiting.indexOf(request);
    if (at === -1) return false;
    this.waiting.splice(at, 1);
    return true;
  }

  private admit(plan: StepPlan): void {
    while (this.freeSequences > 0) {
      const stolen = this.waiting.length === 0 ? this.steal() : undefined;
      if (stolen) this.enqueue(stolen);
      const candidates = admissible(this.waiting);
      const request = this.policy.nextToAdmit(candidates, this.running, this.sequences.size);
      if (!request) return;
      if (request.abortRequested) {
        this.endWaiting(request);
        continue;
      }
      const group = [request, ...request.siblings.filter((s) => s.status === "waiting" && !s.started && !s.abortRequested && !s.paused)];
      // The choices of one request are admitted together or not at all, and nobody passes them.
      if (group.length > this.freeSequences) return;
      for (const member of group) {
        this.remove(member);
        this.start(member, plan);
      }
      for (const sibling of group.slice(1)) sibling.copyFrom = request;
      for (const passed of candidates) if (!group.includes(passed)) this.policy.passedOver(request, passed);
    }
  }

  private start(request: EngineRequest, plan: StepPlan): void {
    const taken = this.sequences.take(request.spec.cacheNamespace, request.tokens, plan.ops);
    request.sequence = taken.sequence;
    request.computed = taken.reused;
    this.saved.resume(request, taken.reused, plan);
    request.status = "running";
    request.admittedAt = performance.now();
    request.progressAt = request.admittedAt;
    this.running.push(request);
    if (!request.samplerBuilt) {
      plan.newSamplers.push(request.samplerToBuild());
      request.samplerBuilt = true;
    }
    if (!request.started) {
      request.started = true;
      if (this.drafting.mode === "auto")
        request.speculation ??= new RequestSpeculation(request.tokens, request.promptLength, request.spec.prediction, this.drafting);
      this.outputs.set(request, new RequestOutput(this.texts, request.spec, request.speculation));
      request.events.push({ type: "started", queuedMs: performance.now() - request.arrivedAt, cachedTokens: taken.reused });
    }
  }

  /**
   * Gives the request's sequence up now. Its cells are saved in the runner's memory (where they fit)
   * and stay in the prefix cache (for its namespace): readmitted, it resumes from them; where
   * neither kept them, it computes its tokens again. Either way it samples on from where it
   * stopped, with the same sampler.
   */
  private preempt(request: EngineRequest, ops: MemoryOp[]): void {
    this.saved.save(request, ops);
    this.release(request, true, ops, undefined);
    request.copyFrom = undefined;
    request.requeued();
    this.preemptions++;
    request.events.push({ type: "preempted" });
    this.enqueue(request);
  }

  /**
   * Gives a running request to the shard its `moveTo` names: its sequence (its cells stay in this
   * shard's prefix cache) and its sampler go; there it computes its tokens again and samples on with
   * a sampler rebuilt from what it generated (EngineRequest.samplerToBuild).
   */
  private moveAway(request: EngineRequest, plan: StepPlan): void {
    const moveTo = request.moveTo!;
    request.moveTo = undefined;
    plan.movedAway++;
    request.moved = true;
    const output = this.outputs.get(request)!;
    this.outputs.delete(request);
    this.release(request, true, plan.ops, plan.freeSamplers);
    request.requeued();
    if (moveTo(output)) return;
    this.outputs.set(request, output);
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
  private endWaiting(request: EngineRequest, reason?: unknown): void {
    if (request.status !== "waiting") return;
    this.remove(request);
    this.saved.drop(request, this.pendingOps);
    request.status = "finished";
    if (request.samplerBuilt) this.pendingFrees.push(request.id);
    const output = this.outputs.get(request);
    this.outputs.delete(request);
    if (!output) {
      request.events.fail(reason ?? new Error("aborted"));
      return;
    }
    for (const event of output.finish("cancelled")) request.events.push(event);
    request.events.close();
  }

  private release(request: EngineRequest, keep: boolean, ops: MemoryOp[], frees: number[] | undefined): void {
    this.running.splice(this.running.indexOf(request), 1);
    this.sequences.give(request.sequence!, keep ? request.tokens.slice(0, request.computed) : undefined, ops, request.promptLength);
    request.sequence = undefined;
    this.cap.released();
    if (frees) {
      frees.push(request.id);
      request.samplerBuilt = false;
    }
  }
}
