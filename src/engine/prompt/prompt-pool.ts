import { Worker } from "node:worker_threads";
import { PromptTemplateError } from "../chat-template.js";
import type { RenderedPrompt } from "../types.js";
import type { PromptJob, PromptReply, PromptWorkerInit } from "./prompt-protocol.js";

/** Renders and tokenizes prompts on worker threads; each job goes to the worker with the fewest waiting. */
export interface PromptPool {
  run(job: DistributiveOmit<PromptJob, "id">): Promise<RenderedPrompt>;
  close(): Promise<void>;
}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

// Compiled, this file is .js beside prompt-worker.js; run from source (tests, tsx), both are .ts.
const WORKER_URL = new URL(`./prompt-worker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);

interface Pending {
  resolve: (prompt: RenderedPrompt) => void;
  reject: (error: Error) => void;
}

class PromptWorker {
  readonly pending = new Map<number, Pending>();
  failure: Error | undefined;
  private constructor(readonly worker: Worker) {}

  static async start(init: PromptWorkerInit): Promise<PromptWorker> {
    const worker = new Worker(WORKER_URL, { workerData: init, name: "switchyard-prompt" });
    await new Promise<void>((resolve, reject) => {
      worker.once("message", () => resolve());
      worker.once("error", reject);
    });
    const self = new PromptWorker(worker);
    worker.on("message", (reply: PromptReply) => self.settle(reply));
    worker.on("error", (error) => self.fail(error));
    worker.on("exit", (code) => self.fail(new Error(`a prompt worker exited (code ${code})`)));
    return self;
  }

  private settle(reply: PromptReply): void {
    const waiting = this.pending.get(reply.id);
    this.pending.delete(reply.id);
    if (!waiting) return;
    if ("error" in reply) waiting.reject(reply.refused ? new PromptTemplateError(reply.error) : new Error(reply.error));
    else waiting.resolve({ tokens: Array.from(reply.tokens) as RenderedPrompt["tokens"], opensThinking: reply.opensThinking });
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const waiting of this.pending.values()) waiting.reject(this.failure);
    this.pending.clear();
  }
}

export async function startPromptPool(init: PromptWorkerInit, size: number): Promise<PromptPool> {
  const slots = Array.from({ length: size }, () => PromptWorker.start(init));
  await Promise.all(slots);
  let nextId = 0;
  let closed = false;
  return {
    async run(job) {
      if (closed) throw new Error("the model is closing");
      // A worker that died (out of memory on a huge prompt) is replaced for the next job.
      for (const [i, slot] of slots.entries()) if ((await slot).failure && slots[i] === slot) slots[i] = PromptWorker.start(init);
      const workers = await Promise.all(slots);
      const worker = workers.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
      const id = nextId++;
      return new Promise<RenderedPrompt>((resolve, reject) => {
        worker.pending.set(id, { resolve, reject });
        worker.worker.postMessage({ ...job, id });
      });
    },
    async close() {
      closed = true;
      await Promise.all(slots.map(async (slot) => (await slot).worker.terminate()));
    },
  };
}
