import { Worker } from "node:worker_threads";
import { PromptTemplateError } from "../chat-template.js";
import type { RenderedPrompt } from "../types.js";
import type { PromptJob, PromptReply, PromptWorkerInit } from "./prompt-protocol.js";

/**
 * Renders and tokenizes prompts on worker threads, one job per worker at a time, shared fairly:
 * each fairness key (the account) has its own queue, the queues take turns, and one key holds at
 * most all workers but one, so another key's prompt always finds a worker free within one job
 * (and a core the huge prompts are not using).
 */
export interface PromptPool {
  run(job: DistributiveOmit<PromptJob, "id">, fairnessKey?: string): Promise<RenderedPrompt>;
  close(): Promise<void>;
}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

// Compiled, this file is .js beside prompt-worker.js; run from source (tests, tsx), both are .ts.
const WORKER_URL = new URL(`./prompt-worker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);

interface QueuedJob {
  job: PromptJob;
  key: string;
  resolve: (prompt: RenderedPrompt) => void;
  reject: (error: Error) => void;
}

class PromptWorker {
  /** The job it is running. */
  current: QueuedJob | undefined;
  failure: Error | undefined;
  private constructor(
    readonly worker: Worker,
    private readonly done: () => void,
  ) {}

  static async start(init: PromptWorkerInit, done: () => void): Promise<PromptWorker> {
    const worker = new Worker(WORKER_URL, { workerData: init, name: "switchyard-prompt" });
    await new Promise<void>((resolve, reject) => {
      worker.once("message", () => resolve());
      worker.once("error", reject);
    });
    const self = new PromptWorker(worker, done);
    worker.on("message", (reply: PromptReply) => self.settle(reply));
    worker.on("error", (error) => self.fail(error));
    worker.on("exit", (code) => self.fail(new Error(`a prompt worker exited (code ${code})`)));
    return self;
  }

  runJob(queued: QueuedJob): void {
    this.current = queued;
    this.worker.postMessage(queued.job);
  }

  private settle(reply: PromptReply): void {
    const queued = this.current;
    this.current = undefined;
    if (queued && queued.job.id === reply.id) {
      if ("error" in reply) queued.reject(reply.refused ? new PromptTemplateError(reply.error) : new Error(reply.error));
      else queued.resolve({ tokens: Array.from(reply.tokens) as RenderedPrompt["tokens"], opensThinking: reply.opensThinking });
    }
    this.done();
  }

  private fail(error: Error): void {
    this.failure ??= error;
    this.current?.reject(this.failure);
    this.current = undefined;
    this.done();
  }
}

/** The next job to run: the first key after the last one served whose queue has a job and whose share is not used up. */
export function nextFairJob<T extends { key: string }>(
  queues: Map<string, T[]>,
  running: ReadonlyMap<string, number>,
  share: number,
  lastKey: string | undefined,
): T | undefined {
  const keys = [...queues.keys()];
  const start = lastKey === undefined ? 0 : keys.indexOf(lastKey) + 1;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[(start + i) % keys.length]!;
    if ((running.get(key) ?? 0) >= share) continue;
    const queue = queues.get(key)!;
    const job = queue.shift()!;
    if (queue.length === 0) queues.delete(key);
    return job;
  }
  return undefined;
}

export async function startPromptPool(init: PromptWorkerInit, size: number): Promise<PromptPool> {
  const pool = new FairPromptPool(init, size);
  await pool.started();
  return pool;
}

/** The workers, and per fairness key a queue of jobs; one key holds at most `share` workers while others wait. */
class FairPromptPool implements PromptPool {
  private readonly share: number;
  private readonly queues = new Map<string, QueuedJob[]>();
  private readonly running = new Map<string, number>();
  private readonly slots: Array<Promise<PromptWorker>> = [];
  private readonly replaced = new WeakSet<PromptWorker>();
  private lastKey: string | undefined;
  private nextId = 0;
  private closed = false;

  constructor(
    private readonly init: PromptWorkerInit,
    size: number,
  ) {
    this.share = Math.max(1, size - 1);
    for (let i = 0; i < size; i++) this.start(i);
  }

  async started(): Promise<void> {
    await Promise.all(this.slots);
  }

  run(job: DistributiveOmit<PromptJob, "id">, fairnessKey = ""): Promise<RenderedPrompt> {
    if (this.closed) return Promise.reject(new Error("the model is closing"));
    return new Promise<RenderedPrompt>((resolve, reject) => {
      const queued: QueuedJob = { job: { ...job, id: this.nextId++ } as PromptJob, key: fairnessKey, resolve, reject };
      const queue = this.queues.get(fairnessKey) ?? [];
      queue.push(queued);
      this.queues.set(fairnessKey, queue);
      void this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.failQueued(new Error("the model is closing"));
    await Promise.all(this.slots.map(async (slot) => (await slot).worker.terminate()));
  }

  private start(i: number): Promise<PromptWorker> {
    return (this.slots[i] = PromptWorker.start(this.init, () => void this.dispatch()));
  }

  // After the one await, the loop runs without yielding, so concurrent calls never hand one worker two jobs.
  private async dispatch(): Promise<void> {
    if (this.closed) return; // a worker that exits now was terminated: nothing replaces it
    let workers: PromptWorker[];
    try {
      workers = await Promise.all(this.slots);
    } catch (error) {
      // A replacement worker could not start: the jobs waiting fail rather than wait forever.
      this.failQueued(error as Error);
      return;
    }
    for (const [i, worker] of workers.entries()) {
      if (this.closed) return;
      if (worker.failure) {
        // A worker that died (out of memory on a huge prompt) is replaced; its queue waits for the new one.
        if (!this.replaced.has(worker)) {
          this.replaced.add(worker);
          this.start(i).then(
            () => this.dispatch(),
            () => undefined,
          );
        }
        continue;
      }
      if (worker.current) continue;
      const queued = nextFairJob(this.queues, this.running, this.share, this.lastKey);
      if (!queued) return;
      this.assign(worker, queued);
    }
  }

  private assign(worker: PromptWorker, queued: QueuedJob): void {
    this.lastKey = queued.key;
    this.running.set(queued.key, (this.running.get(queued.key) ?? 0) + 1);
    const { resolve, reject } = queued;
    queued.resolve = (prompt) => {
      this.release(queued.key);
      resolve(prompt);
    };
    queued.reject = (error) => {
      this.release(queued.key);
      reject(error);
    };
    worker.runJob(queued);
  }

  private release(key: string): void {
    const count = this.running.get(key)! - 1;
    if (count === 0) this.running.delete(key);
    else this.running.set(key, count);
  }

  private failQueued(error: Error): void {
    for (const queue of this.queues.values()) for (const queued of queue) queued.reject(error);
    this.queues.clear();
  }
}
