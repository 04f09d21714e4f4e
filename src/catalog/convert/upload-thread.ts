import { Worker } from "node:worker_threads";
import { AdapterConfigError } from "./peft-lora.js";

/**
 * An uploaded adapter's work, against its base's GGUF: a GGUF LoRA's header checked, or a PEFT
 * folder converted to `out`.
 */
export type UploadJob =
  | { kind: "gguf"; path: string; basePath: string }
  | { kind: "peft"; dir: string; baseId: string; basePath: string; out: string; name: string };

// Compiled, this file is .js beside the worker's .js; run from source (tests, tsx), both are .ts.
const WORKER_URL = new URL(`./upload-worker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);

/**
 * Runs the job on a thread of its own: parsing an account's file (a GGUF header, a safetensors
 * header's JSON) and converting it (every value widened to F32, rows reordered: ~70 ms for a 10 MB
 * adapter, growing with its size) would otherwise hold every stream's next token that long.
 * Resolves with the written file's size and hash for a conversion; rejects with the reason (an
 * AdapterConfigError where adapter_config.json is at fault).
 */
export function runUploadJob(job: UploadJob): Promise<{ bytes: number; sha256: string } | undefined> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_URL, { workerData: job, name: "switchyard-adapter-upload" });
    worker.once("message", (answer: { written?: { bytes: number; sha256: string }; error?: string; inConfig?: boolean }) => {
      if (answer.error !== undefined) reject(answer.inConfig ? new AdapterConfigError(answer.error) : new Error(answer.error));
      else resolve(answer.written);
      void worker.terminate();
    });
    worker.once("error", reject);
    worker.once("exit", (code) => reject(new Error(`the adapter's thread exited (code ${code}) before it answered`)));
  });
}
