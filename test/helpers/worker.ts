import { spawn, type ChildProcess } from "node:child_process";
import { CLI, reapOnExit, SMOLLM2, TEST_ENGINE, waitFor } from "./server.js";

export const WORKER_KEY = "test-worker-key-0123456789abcdef";

export interface RunningWorker {
  url: string;
  /** The base URL a gateway's catalog names: `${url}/v1`. */
  baseURL: string;
  process: ChildProcess;
  logs: () => string;
  stop(): Promise<void>;
}

/** Starts a real `switchyard serve --worker` on a random port and waits until its model is loaded. */
export async function startWorker(env: NodeJS.ProcessEnv = {}): Promise<RunningWorker> {
  let output = "";
  const child = reapOnExit(
    spawn(process.execPath, [CLI, "serve", "--worker", "--port", "0", "--models", SMOLLM2], {
      env: { ...process.env, SWITCHYARD_LOG_LEVEL: "warn", SWITCHYARD_WORKER_KEY: WORKER_KEY, ...TEST_ENGINE, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = await waitFor(async () => {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`worker exited early:\n${output}`);
    const match = /Worker: (http:\/\/\S+)\/v1/.exec(output);
    if (!match) return undefined;
    const health = await fetch(`${match[1]}/health`).catch(() => undefined);
    return health?.status === 200 ? match[1] : undefined;
  }, 120_000);
  return {
    url,
    baseURL: `${url}/v1`,
    process: child,
    logs: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Requests the worker has finished (its /metrics `request_success_total`, over every finish reason). */
export async function workerServed(worker: RunningWorker): Promise<number> {
  const text = await (await fetch(`${worker.url}/metrics`)).text();
  return text
    .split("\n")
    .filter((line) => line.startsWith("vllm:request_success_total{"))
    .reduce((n, line) => n + Number(line.split(" ").at(-1)), 0);
}
