import { Worker } from "node:worker_threads";
import type { DropAdapterMessage, RunnerInit, StepMessage, StepReply } from "./step-protocol.js";

/** The main thread's handle on a shard's worker: one step in flight at a time. */
export interface ShardRunner {
  step(message: StepMessage): Promise<StepReply>;
  /** The context stops applying this LoRA adapter if it does; call with no step in flight. */
  dropAdapter(adapter: bigint): Promise<void>;
  close(): Promise<void>;
}

// Compiled, this file is .js beside shard-worker.js; run from source (tests, tsx), both are .ts.
const WORKER_URL = new URL(`./shard-worker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);

export async function startShardRunner(init: RunnerInit): Promise<ShardRunner> {
  const worker = new Worker(WORKER_URL, { workerData: init, name: "switchyard-shard" });
  let pending: { resolve: (reply: StepReply) => void; reject: (error: Error) => void } | undefined;
  /** Adapter drops not yet answered, in the order sent (the worker answers messages in order). */
  const drops: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];
  let failure: Error | undefined;
  const fail = (error: Error) => {
    failure ??= error;
    pending?.reject(error);
    pending = undefined;
    for (const drop of drops.splice(0)) drop.reject(error);
  };
  await new Promise<void>((resolve, reject) => {
    worker.once("message", () => resolve());
    worker.once("error", reject);
  });
  worker.on("error", fail);
  worker.on("exit", (code) => fail(new Error(`the engine's runner thread exited (code ${code})`)));
  worker.on("message", (reply: StepReply | { type: "closed" } | { type: "adapter-dropped" }) => {
    if (reply.type === "adapter-dropped") drops.shift()?.resolve();
    if (reply.type !== "step") return;
    const waiting = pending;
    pending = undefined;
    waiting?.resolve(reply);
  });
  return {
    step(message) {
      if (failure) return Promise.reject(failure);
      if (pending) return Promise.reject(new Error("a step is already running on this shard"));
      return new Promise<StepReply>((resolve, reject) => {
        pending = { resolve, reject };
        worker.postMessage(message);
      });
    },
    dropAdapter(adapter) {
      if (failure) return Promise.reject(failure);
      return new Promise<void>((resolve, reject) => {
        drops.push({ resolve, reject });
        worker.postMessage({ type: "drop-adapter", adapter } satisfies DropAdapterMessage);
      });
    },
    async close() {
      if (failure) return;
      const closed = new Promise<void>((resolve) => {
        const onMessage = (message: { type: string }) => {
          if (message.type !== "closed") return;
          worker.off("message", onMessage);
          resolve();
        };
        worker.on("message", onMessage);
      });
      worker.postMessage({ type: "close" });
      await closed;
      await worker.terminate();
    },
  };
}
