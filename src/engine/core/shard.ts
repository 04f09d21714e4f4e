import type { ShardScheduler } from "./scheduler.js";
import type { StepPlan } from "./step-plan.js";
import type { ShardRunner } from "../runner/shard-runner.js";
import type { StepReply } from "../runner/step-protocol.js";
import type { EngineCounters } from "../types.js";

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
  readonly counters: StepCounters = { steps: 0, batchTokens: 0, promptTokensComputed: 0, restoredCells: 0, sampledTokens: 0, decodeMs: 0, sampleMs: 0, roundTripMs: 0, hostMs: 0 };

  constructor(
    readonly scheduler: ShardScheduler,
    private readonly runner: ShardRunner,
    /** Threads this shard's next step may use: the cores that no other busy shard is using. */
    private readonly threads: () => number,
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

  private async loop(): Promise<void> {
    while (!this.closed) {
      const planning = performance.now();
      const plan = this.scheduler.schedule();
      if (plan.isEmpty) {
        await this.sleep();
        continue;
      }
      let reply: StepReply;
      const started = performance.now();
      try {
        reply = await this.runner.step(plan.message(this.threads()));
      } catch (error) {
        this.failAll(error as Error);
        return;
      }
      const replied = performance.now();
      // The whole round trip, sampling included: what every stream on the shard waits for.
      if (reply.error === undefined) this.scheduler.cost.observe(plan.shape, replied - started);
      this.postprocess(plan, reply);
      this.counters.roundTripMs += replied - started;
      this.counters.hostMs += started - planning + (performance.now() - replied);
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
    if (reply.error !== undefined) return;
    this.counters.steps++;
    this.counters.batchTokens += plan.batchSize;
    this.counters.sampledTokens += plan.sampled.length;
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
