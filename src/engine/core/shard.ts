import type { ShardScheduler } from "./scheduler.js";
import type { StepShape } from "./cost-model.js";
import type { StepGate } from "./step-gate.js";
import type { StepPlan } from "./step-plan.js";
import type { ShardRunner } from "../runner/shard-runner.js";
import type { StepReply } from "../runner/step-protocol.js";
import type { EngineCounters } from "../types.js";

/** How often a held shard looks whether the priority prompt it gave way to has loaded. */
const HOLD_CHECK_MS = 5;
/** Longest a shard holds at a time, whatever the other shard's prompt is doing (one step is ~300 ms). */
const MAX_HOLD_MS = 1000;

/**
 * Longest a priority prompt's step waits for the other shards' steps to end, so that it runs on every
 * core: twice as fast on two, against a wait of at most one short step.
 */
const RUSH_WAIT_MS = 150;

/** What a shard asks of the model's other shards, sharing the cores (core/shard-group.ts). */
export interface ShardGroupView {
  /** Threads a step may use now. */
  threadsFor(): number;
  /** Whether `shard` should skip its next step for another shard's priority prompt. */
  holdFor(shard: Shard): boolean;
  othersOf(shard: Shard): Shard[];
  /** A priority request ran or waited on one of the shards a moment ago. */
  priorityNearby(): boolean;
  /** Held by each step in flight; a change to the model (an adapter loaded or freed) waits for none. */
  readonly gate: StepGate;
}

/** What a shard's steps did, since it started: where the engine's time goes. */
export type StepCounters = EngineCounters;

/**
 * One shard's step loop (nano-vllm's `step`): schedule, run the batch on the shard's runner thread,
 * hand the reply to the scheduler, and feed the step's measured time to the shard's cost model. The
 * main thread only plans and post-processes; while the runner decodes, it serves HTTP. When there is nothing to do the loop sleeps until `wake`.
 */
export class Shard {
  private sleeping: (() => void) | undefined;
  private closed = false;
  /** Its runner thread died: it takes no more requests. */
  failure: Error | undefined;
  private readonly done: Promise<void>;
  readonly counters: StepCounters = {
    steps: 0,
    batchTokens: 0,
    promptTokensComputed: 0,
    restoredCells: 0,
    sampledTokens: 0,
    setupMs: 0,
    decodeMs: 0,
    sampleMs: 0,
    roundTripMs: 0,
    hostMs: 0,
    adapterTurnSteps: 0,
    movedRequests: 0,
  };

  /** Sleeping between steps so that another shard's priority prompt has every core. */
  held = false;
  /** It held last time round: it runs a step before it holds again, so back-to-back priority prompts elsewhere never stop it. */
  private heldLast = false;

  constructor(
    readonly scheduler: ShardScheduler,
    private readonly runner: ShardRunner,
    /** The model's shards, sharing the cores (core/shard-group.ts). */
    private readonly group: ShardGroupView,
  ) {
    this.done = this.loop();
  }

  /** It has requests running or waiting (a paused one waits for its reader, not for this shard). */
  get busy(): boolean {
    return this.scheduler.running.length > 0 || this.scheduler.waiting.some((r) => !r.paused);
  }

  wake(): void {
    const sleeping = this.sleeping;
    this.sleeping = undefined;
    sleeping?.();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake();
    await this.done;
    await this.runner.close();
  }

  /** The runner's context stops applying `adapter` if it does (before llama.cpp frees it); no step may be in flight. */
  dropAdapter(adapter: bigint): Promise<void> {
    return this.failure ? Promise.resolve() : this.runner.dropAdapter(adapter);
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      if (!this.heldLast && this.group.holdFor(this)) {
        await this.hold();
        this.heldLast = true;
        continue;
      }
      const planning = performance.now();
      const plan = this.scheduler.schedule(this.group.priorityNearby());
      if (plan.isEmpty) {
        await this.sleep();
        continue;
      }
      this.heldLast = false;
      if (this.scheduler.rushing) await this.othersHeld(planning);
      let reply: StepReply;
      await this.group.gate.enterStep();
      const started = performance.now();
      try {
        reply = await this.runner.step(plan.message(this.group.threadsFor()));
      } catch (error) {
        this.failAll(error as Error);
        return;
      } finally {
        this.group.gate.leaveStep();
      }
      const replied = performance.now();
      // The whole round trip, sampling included: what every stream on the shard waits for.
      if (reply.error === undefined) this.measured(plan.shape, replied - started);
      this.postprocess(plan, reply);
      this.counters.roundTripMs += replied - started;
      this.counters.hostMs += started - planning + (performance.now() - replied);
    }
  }

  /** A step's measured time: the cost model learns it; a step with drafts that overran its prediction lowers the draft ceiling. */
  private measured(shape: StepShape, ms: number): void {
    const cost = this.scheduler.cost;
    if (shape.draftTokens) this.scheduler.drafting.stepTook(shape.draftTokens, cost.predict(shape), ms);
    cost.observe(shape, ms);
  }

  /**
   * Skips steps while another shard loads a priority prompt on every core (a priority request's time
   * to first token is its prefill, and a prefill on one of two cores takes twice as long); looks
   * again every HOLD_CHECK_MS or when woken. Then the shard runs a step before it holds again.
   */
  private async hold(): Promise<void> {
    this.held = true;
    const until = performance.now() + MAX_HOLD_MS;
    while (!this.closed && this.group.holdFor(this) && performance.now() < until) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.sleeping = resolve;
        timer = setTimeout(() => this.wake(), HOLD_CHECK_MS);
      });
      clearTimeout(timer);
    }
    this.held = false;
  }

  /**
   * Before a priority prompt's step: the other busy shards end the step they are in and hold, so this
   * one runs on every core (at most RUSH_WAIT_MS: their steps are short while priority is about).
   */
  private async othersHeld(since: number): Promise<void> {
    // Shards with a priority stream of their own never hold.
    const holding = (other: Shard) => !other.busy || other.held || other.scheduler.servingPriority;
    while (!this.group.othersOf(this).every(holding) && performance.now() - since < RUSH_WAIT_MS) {
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  /** Until woken; with requests running (paused ones, or stalled), no longer than the scheduler's next check. */
  private async sleep(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.sleeping = resolve;
      const checkMs = this.scheduler.nextCheckMs;
      if (checkMs !== undefined) timer = setTimeout(() => this.wake(), checkMs);
    });
    clearTimeout(timer);
  }

  private postprocess(plan: StepPlan, reply: StepReply): void {
    const { promptTokens, restoredCells } = this.scheduler.update(plan, reply);
    this.counters.promptTokensComputed += promptTokens;
    this.counters.restoredCells += restoredCells;
    this.counters.movedRequests += plan.movedAway;
    if (reply.error !== undefined) return;
    this.counters.steps++;
    this.counters.batchTokens += plan.batchSize;
    if (plan.otherAdaptersWait) this.counters.adapterTurnSteps++;
    this.counters.sampledTokens += plan.sampled.length;
    this.counters.setupMs += reply.setupMs;
    this.counters.decodeMs += reply.decodeMs;
    this.counters.sampleMs += reply.sampleMs;
  }

  /** The runner thread is gone: every request here fails, and the shard takes no more. */
  private failAll(error: Error): void {
    this.closed = true;
    this.failure = error;
    this.scheduler.failAll(error);
  }
}
