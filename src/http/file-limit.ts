import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/** What the open-file limit was and is: `soft` is what the process may open now. */
export interface FileLimit {
  /** The soft limit found. */
  before: number;
  /** The soft limit now. */
  soft: number;
  /** The hard limit (Infinity when unlimited). */
  hard: number;
  /** The soft limit was raised by this call. */
  raised: boolean;
}

/**
 * RLIMIT_NOFILE through libc (Linux x86-64 and arm64: resource 7, struct rlimit of two uint64), run
 * in a thread of its own: koffi's configuration is per thread and frozen by the first library it
 * loads, and the main thread's is set later by the llama.cpp binding (a larger call stack), so libc
 * must not be loaded there first. Plain JavaScript, evaluated: a worker cannot load a .ts file
 * when the tests run from source. An unlimited hard limit (2^64 - 1) is left alone: the kernel
 * refuses a soft limit above fs.nr_open.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const koffi = require(workerData.koffi);
const lib = koffi.load("libc.so.6");
koffi.struct("rlimit", { rlim_cur: "uint64", rlim_max: "uint64" });
const getrlimit = lib.func("int getrlimit(int resource, _Out_ rlimit *limit)");
const setrlimit = lib.func("int setrlimit(int resource, const rlimit *limit)");
const RLIMIT_NOFILE = 7;
const toNumber = (value) => (BigInt(value) === 2n ** 64n - 1n ? Infinity : Number(value));
function read() {
  const limit = { rlim_cur: 0, rlim_max: 0 };
  if (getrlimit(RLIMIT_NOFILE, limit) !== 0) return null;
  return { soft: toNumber(limit.rlim_cur), hard: toNumber(limit.rlim_max) };
}
function raise() {
  const found = read();
  if (!found) return null;
  const result = { before: found.soft, soft: found.soft, hard: found.hard, raised: false };
  if (found.soft >= found.hard || !Number.isFinite(found.hard)) return result;
  if (setrlimit(RLIMIT_NOFILE, { rlim_cur: found.hard, rlim_max: found.hard }) !== 0) return result;
  const now = read();
  return now ? { ...result, soft: now.soft, raised: now.soft > found.soft } : result;
}
parentPort.postMessage(workerData.raise ? raise() : read());
`;

const supported = process.platform === "linux" && (process.arch === "x64" || process.arch === "arm64");

/** Runs the libc calls in their own thread; null where they cannot run. */
function inWorker<T>(raise: boolean): Promise<T | null> {
  if (!supported) return Promise.resolve(null);
  return new Promise((resolve) => {
    const koffi = createRequire(import.meta.url).resolve("koffi");
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { raise, koffi }, name: "switchyard-file-limit" });
    worker.once("message", (result: T | null) => resolve(result));
    worker.once("error", () => resolve(null));
    worker.once("exit", () => resolve(null));
  });
}

/** The process's RLIMIT_NOFILE, or null where it cannot be read (not Linux x86-64/arm64). */
export function readFileLimit(): Promise<{ soft: number; hard: number } | null> {
  return inWorker(false);
}

/**
 * Raises the soft RLIMIT_NOFILE to the hard limit, as far as the kernel allows: every open
 * connection is a descriptor, and a soft limit of 1024 would cap connections long before memory
 * does. Node already raises it at start on Linux, so this mostly confirms it; it matters when
 * something lowered the limit since. Returns null where the limit cannot be read.
 */
export function raiseFileLimit(): Promise<FileLimit | null> {
  return inWorker(true);
}
