import { parentPort, workerData } from "node:worker_threads";
import { readGgufLayout } from "../gguf/layout.js";
import { checkGgufLora, checkGgufTensorData } from "./lora-checks.js";
import { AdapterConfigError, writePeftLoraGguf } from "./peft-lora.js";
import type { UploadJob } from "./upload-thread.js";

/** One uploaded adapter's check or conversion on its own thread (upload-thread.ts): the answer, or the reason it was refused. */
const job = workerData as UploadJob;
try {
  const base = await readGgufLayout(job.basePath);
  if (job.kind === "gguf") {
    const layout = await readGgufLayout(job.path);
    checkGgufLora(layout, base);
    checkGgufTensorData(layout);
    parentPort!.postMessage({});
  } else {
    const written = await writePeftLoraGguf(job.dir, { id: job.baseId, layout: base }, job.out, job.name);
    parentPort!.postMessage({ written: { bytes: written.bytes, sha256: written.sha256 } });
  }
} catch (error) {
  const inConfig = error instanceof AdapterConfigError;
  parentPort!.postMessage({ error: error instanceof Error ? error.message : String(error), ...(inConfig ? { inConfig } : {}) });
}
