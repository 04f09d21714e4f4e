import { Worker } from "node:worker_threads";
import type { RunnerInit, StepMessage, StepReply } from "./step-protocol.js";

/** The main thread's handle on a shard's worker: one step in flight at a time. */
export interface ShardRunner {
  step(message: StepMessage): Promise<StepReply>;
  close(): Promise<void>;
}

// Compiled, this file is .js beside shard-worker.js; run from source (tests, tsx), both are .ts.
const WORKER_URL = new URL(`./shard-worker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);

export async function startShardRunner(init: RunnerInit): Promise<ShardRunner> {
  const worker = new Worker(WORKER_URL, { workerData: init, name: "switchyard-shard" });
  let pending: { resolve: (reply: StepReply) => void; reject: (error: Error) => void } | undefined;
  let failure: Error | undefined;
  const fail = (error: Error) => {
    failure ??= error;
    pending?.reject(error);
    pending = undefined;
  };
  await new Promise<void>((resolve, reject) => {
    worker.once("message", () => resolve());
    worker.once("error", reject);
  });
  worker.on("error", fail);
  worker.on("exit", (code) => fail(new Error(`the engine's runner thread exited (code ${code})`)));
  worker.on("message", (reply: StepReply | { type: "closed" }) => {
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
    async close() {
      if (failure) return;
      const closed = new Promise<void>((resolve) => worker.once("message", () => resolve()));
      worker.postMessage({ type: "close" });
      await closed;
      await worker.terminate();
    },
  };
}
