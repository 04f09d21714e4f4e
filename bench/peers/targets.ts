import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { PREBUILT_FILES, prebuiltLibraryDir } from "../../src/engine/native/llama-lib.js";
import type { Target } from "../load/client-stream.js";

/** A server started for the benchmark, on the same GGUF file and thread count as the others. */
export interface RunningTarget {
  target: Target;
  stop(): Promise<void>;
}

/**
 * The ggml CPU variant library a running process has mapped (e.g. "haswell"), or null if none is. A
 * one-variant peer build (SWITCHYARD_PEER_CPU_VARIANT) maps a plain libggml-cpu.so from a build
 * directory named llama.cpp-<tag>-cpu-<variant>.
 */
export function cpuVariant(pid: number | undefined): string | null {
  if (pid === undefined) return null;
  try {
    const maps = readFileSync(`/proc/${pid}/maps`, "utf8");
    return /libggml-cpu-([a-z0-9_]+)\.so/.exec(maps)?.[1] ?? /-cpu-([a-z0-9_]+)\/build\/bin\/libggml-cpu\.so/.exec(maps)?.[1] ?? null;
  } catch {
    return null;
  }
}

/** This machine's CPU model and the SIMD flags that decide which ggml kernels run. */
export function cpuDescription(): { model: string; flags: string[] } {
  const info = readFileSync("/proc/cpuinfo", "utf8");
  const model = /^model name\s*:\s*(.*)$/m.exec(info)?.[1]?.trim() ?? "unknown";
  const all = /^flags\s*:\s*(.*)$/m.exec(info)?.[1]?.split(/\s+/) ?? [];
  return { model, flags: all.filter((f) => /^(avx|fma|f16c|amx|sse4|vnni|bmi2)/.test(f)) };
}

export interface PeerOptions {
  modelId: string;
  modelPath: string;
  threads: number;
  /** Sequences decoded together (our engine) or parallel slots (llama-server). */
  parallel: number;
  /** Tokens per sequence. */
  contextPerSequence: number;
  port: number;
  /** Ours: models served beside modelId (e.g. a LoRA adapter of it, from a catalog in SWITCHYARD_CATALOG). */
  alsoServe?: string[];
}

const ROOT = resolve(import.meta.dirname, "../..");

/** The published GGUF file of a pulled catalog model (what every side of a comparison loads). */
export function listedModelPath(modelId: string): string {
  const args = [join(ROOT, "bin/switchyard.js"), "models", "list", "--json"];
  const models = JSON.parse(execFileSync(process.execPath, args, { encoding: "utf8" })) as Array<{
    id: string;
    published_path: string | null;
  }>;
  const path = models.find((m) => m.id === modelId)?.published_path;
  if (!path) throw new Error(`${modelId} is not pulled: run 'npx switchyard models pull ${modelId}'`);
  return path;
}

/** `root`: the checkout whose built server runs (another, built, for "this change against the last" in one run). */
export async function startSwitchyard(
  options: PeerOptions,
  name = "switchyard",
  env: NodeJS.ProcessEnv = {},
  root = ROOT,
): Promise<RunningTarget> {
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-bench-"));
  let output = "";
  // BENCH_SERVER_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof": profiles the server under the load (NODE_OPTIONS refuses --cpu-prof).
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      join(root, "bin/switchyard.js"),
      "serve",
      "--port",
      String(options.port),
      "--data-dir",
      dataDir,
      "--models",
      [options.modelId, ...(options.alsoServe ?? [])].join(","),
    ],
    {
      env: {
        ...process.env,
        SWITCHYARD_THREADS: String(options.threads),
        SWITCHYARD_PARALLEL: String(options.parallel),
        SWITCHYARD_MAX_CONTEXT: String(options.contextPerSequence),
        SWITCHYARD_LOG_LEVEL: "warn",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  child.stdout!.on("data", (d: Buffer) => (output += d));
  child.stderr!.on("data", (d: Buffer) => (output += d));
  const url = `http://127.0.0.1:${options.port}`;
  await waitHealthy(child, `${url}/health`, () => output);
  // With stdout not a terminal, the first key goes to an owner-only file in the data dir.
  const keyFile = join(dataDir, "first-api-key.txt");
  const key = existsSync(keyFile) ? readFileSync(keyFile, "utf8").trim() : /(sk-sy-[A-Za-z0-9_-]+)/.exec(output)?.[1];
  if (!key) {
    // A database that already has keys (a reused SWITCHYARD_DATABASE_URL) prints none: stop the
    // server rather than leave it on the port for the next target to reach.
    await kill(child);
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error(`no API key in the server's first-run output (a database with keys already?):\n${output}`);
  }
  return {
    target: { name, baseURL: `${url}/v1/compat`, key, model: options.modelId, pid: child.pid },
    stop: async () => {
      await kill(child);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Which llama.cpp binaries the peer runs, and with what flags: nothing that handicaps it. The peer is
 * built as node-llama-cpp builds our CPU libraries (bench/peers/build-llama-server.sh), so both load
 * the same ggml CPU variant for this machine (see `cpuVariant`), AMX kernels and weight repacking
 * included. On a VM that reports AMX but does not enable its tile state, the peer's own build dies
 * with SIGILL at the first `tilezero` (seen on Sapphire Rapids VMs, 2026-11-28 and 2026-12-06), where
 * node-llama-cpp's prebuilt libraries, the files our engine loads, run (their S_PP at 64 tokens on
 * SmolLM2: 812 tok/s, against 289 for the peer's own build with `--no-repack`). There the peer runs
 * on our prebuilt libraries (`onOurBinaries`): the same kernels as ours, as a comparison of servers
 * needs; only where those die too does it fall back to its own build with `--no-repack`, as its users
 * there must. Found once per run with a tiny llama-batched-bench run, and said.
 */
interface PeerBinaries {
  /** Where llama-server and llama-batched-bench are. */
  dir: string;
  env: NodeJS.ProcessEnv;
  flags: string[];
  ours: boolean;
}
let peerBinariesFound: PeerBinaries | undefined;
function peerBinaries(builtServer: string, modelPath: string): PeerBinaries {
  if (peerBinariesFound) return peerBinariesFound;
  const probe = (dir: string, env: NodeJS.ProcessEnv) =>
    spawnSync(
      join(dir, "llama-batched-bench"),
      ["-m", modelPath, "-c", "256", "-b", "64", "-npp", "8", "-ntg", "2", "-npl", "2", "-t", "1"],
      {
        encoding: "utf8",
        env: { ...process.env, ...env },
      },
    );
  const own: PeerBinaries = { dir: join(builtServer, ".."), env: {}, flags: [], ours: false };
  if (probe(own.dir, {}).signal !== "SIGILL") return (peerBinariesFound = own);
  const onOurs = onOurBinaries(builtServer);
  const ours: PeerBinaries = { dir: join(onOurs.binary, ".."), env: onOurs.env, flags: [], ours: true };
  if (probe(ours.dir, ours.env).status === 0) {
    process.stderr.write(
      "the peer's own llama.cpp build dies with SIGILL (AMX) here and node-llama-cpp's prebuilt libraries run: the peer and the ceilings run on those, the same kernels as ours\n",
    );
    return (peerBinariesFound = ours);
  }
  process.stderr.write("llama.cpp's AMX kernels die with SIGILL on this machine: the peer runs with --no-repack, as its users here must\n");
  return (peerBinariesFound = { ...own, flags: ["--no-repack"] });
}
/**
 * llama.cpp's llama-server from the release node-llama-cpp ships; null when it is not built (bench/peers/build-llama-server.sh).
 * `extraArgs`: e.g. `--embeddings --pooling mean` for an embedding model. `ourBinaries`: the same
 * llama-server run on node-llama-cpp's prebuilt llama.cpp and ggml libraries, the very files our
 * engine loads (see `onOurBinaries`), so the two servers differ only in what is around the kernels.
 */
export async function startLlamaServer(
  options: PeerOptions,
  name = "llama-server",
  extraArgs: string[] = [],
  { ourBinaries = false } = {},
): Promise<RunningTarget | null> {
  const built = builtPeer("build-llama-server.sh");
  if (!built) return null;
  const chosen = peerBinaries(built, options.modelPath);
  const { binary, env } = ourBinaries || chosen.ours ? onOurBinaries(built) : { binary: built, env: {} };
  const child = spawn(
    binary,
    [
      "-m",
      options.modelPath,
      ...chosen.flags,
      "-t",
      String(options.threads),
      "-tb",
      String(options.threads),
      "-np",
      String(options.parallel),
      "-cb",
      "-c",
      String(options.parallel * options.contextPerSequence),
      "--port",
      String(options.port),
      "--host",
      "127.0.0.1",
      ...extraArgs,
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } },
  );
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d));
  child.stderr!.on("data", (d: Buffer) => (output += d));
  const url = `http://127.0.0.1:${options.port}`;
  await waitHealthy(child, `${url}/health`, () => output);
  child.once("exit", (code, signal) => process.stderr.write(`${name} exited (${code ?? signal}):\n${output.slice(-2000)}\n`));
  return { target: { name, baseURL: `${url}/v1`, key: "none", model: options.modelId, pid: child.pid }, stop: () => kill(child) };
}

/** One of bench/peers' own TypeScript servers in a process of its own, once it answers /health on 127.0.0.1:`port`. */
async function startScriptPeer(script: string, port: number, args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const argv = ["--import", "tsx", join(ROOT, "bench/peers", script), "--port", String(port), ...args];
  const child = spawn(process.execPath, argv, { stdio: ["ignore", "pipe", "pipe"], cwd: ROOT });
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d));
  child.stderr!.on("data", (d: Buffer) => (output += d));
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(child, `${url}/health`, () => output);
  return { child, url };
}

/** The instant upstream (instant-upstream.ts) in a process of its own: no engine, a fixed TTFT and ITL. */
export async function startInstantUpstream(port: number, ttftMs: number, itlMs: number, modelId: string): Promise<RunningTarget> {
  const { child, url } = await startScriptPeer("instant-upstream.ts", port, ["--ttft-ms", String(ttftMs), "--itl-ms", String(itlMs)]);
  return {
    target: { name: "instant upstream", baseURL: `${url}/v1`, key: "none", model: modelId, pid: child.pid },
    stop: () => kill(child),
  };
}

/** A bare Node relay in front of `upstream` (peers/bare-relay.ts): the floor of one more Node hop. */
export async function startBareRelay(port: number, upstream: RunningTarget): Promise<RunningTarget> {
  const { child, url } = await startScriptPeer("bare-relay.ts", port, ["--upstream", new URL(upstream.target.baseURL).origin]);
  return { target: { ...upstream.target, name: "bare relay", baseURL: `${url}/v1`, pid: child.pid }, stop: () => kill(child) };
}

/**
 * A directory beside the peer's build where its llama-server finds node-llama-cpp's prebuilt
 * libllama, libggml, libggml-base and CPU variants under the names it was linked against (the
 * same llama.cpp release, so the same ABI), and only its own server code. Measured here
 * (2026-11-26, zen4): the peer's own GCC 12 build ran all-MiniLM-L6-v2's F32 matrix products
 * (tinyBLAS, the same kernel) 1.8x faster than node-llama-cpp's GCC 11 build, on one thread; this
 * is how a comparison of servers leaves the compilers out.
 */
function onOurBinaries(peerBinary: string): { binary: string; env: NodeJS.ProcessEnv } {
  const peerDir = join(peerBinary, "..");
  const ours = prebuiltLibraryDir();
  const dir = join(peerDir, "..", "..", "on-node-llama-cpp-binaries");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // The server's own code, copied: the loader looks for CPU variants beside the executable.
  for (const [file, as] of [
    ["llama-server", "llama-server"],
    ["libllama-server-impl.so", "libllama-server-impl.so"],
    ["libllama-common.so", "libllama-common.so.0"],
    ["libmtmd.so", "libmtmd.so.0"],
    ["llama-batched-bench", "llama-batched-bench"],
    ["libllama-batched-bench-impl.so", "libllama-batched-bench-impl.so"],
  ]) {
    if (existsSync(join(peerDir, file!))) copyFileSync(join(peerDir, file!), join(dir, as!));
  }
  const link = (file: string, ...names: string[]) => names.forEach((n) => symlinkSync(join(ours, file), join(dir, n)));
  link(PREBUILT_FILES.llama, "libllama.so.0", PREBUILT_FILES.llama);
  link(PREBUILT_FILES.ggml, "libggml.so.0", PREBUILT_FILES.ggml);
  link(PREBUILT_FILES.ggmlBase, "libggml-base.so.0", PREBUILT_FILES.ggmlBase);
  for (const variant of readdirSync(ours).filter((f) => /^libggml-cpu-.*\.so$/.test(f))) link(variant, variant);
  return { binary: join(dir, "llama-server"), env: { LD_LIBRARY_PATH: dir } };
}

/**
 * llama.cpp's own `llama-batched-bench`: `sequences` sequences of `prompt` tokens each, then
 * `generate` tokens each, decoded together with no server around them, one KV stream per sequence
 * (as our engine has). Its S_TG (decode tokens/s) is the ceiling for a step loop on this file and
 * these threads. Null when it is not built.
 */
export function runBatchedBench(
  options: PeerOptions,
  shape = { prompt: 128, generate: 128, sequences: 16 },
): { sTg: number; sPp: number; output: string } | null {
  const server = builtPeer("build-llama-server.sh");
  if (!server || !existsSync(join(server, "..", "llama-batched-bench"))) return null;
  const chosen = peerBinaries(server, options.modelPath);
  const binary = join(chosen.dir, "llama-batched-bench");
  const context = shape.sequences * (shape.prompt + shape.generate);
  const args = [
    "-m",
    options.modelPath,
    ...chosen.flags,
    "-t",
    String(options.threads),
    "-tb",
    String(options.threads),
    "-c",
    String(context),
    "-b",
    "2048",
    "-ub",
    "512",
  ];
  args.push("-npp", String(shape.prompt), "-ntg", String(shape.generate), "-npl", String(shape.sequences));
  const result = spawnSync(binary, args, { encoding: "utf8", env: { ...process.env, ...chosen.env } });
  const output = `${result.stdout}${result.stderr}`;
  // | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
  const row = output
    .split("\n")
    .map((line) =>
      line
        .split("|")
        .map((cell) => cell.trim())
        .filter(Boolean),
    )
    .find((cells) => cells.length === 10 && cells[2] === String(shape.sequences));
  if (!row) throw new Error(`llama-batched-bench printed no result row:\n${output.slice(-2000)}`);
  return { sPp: Number(row[5]), sTg: Number(row[7]), output };
}

/**
 * llama-cpp-python's server (one request at a time; by default a new request interrupts the one streaming,
 * which `--interrupt_requests False` turns off so requests queue); null when not installed (bench/peers/install-llama-cpp-python.sh). */
export async function startLlamaCppPython(options: PeerOptions): Promise<RunningTarget | null> {
  const python = builtPeer("install-llama-cpp-python.sh");
  if (!python) return null;
  const child = spawn(
    python,
    [
      "-m",
      "llama_cpp.server",
      "--model",
      options.modelPath,
      "--n_threads",
      String(options.threads),
      "--n_threads_batch",
      String(options.threads),
      "--n_ctx",
      String(options.contextPerSequence),
      "--interrupt_requests",
      "False",
      "--port",
      String(options.port),
      "--host",
      "127.0.0.1",
    ],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d));
  child.stderr!.on("data", (d: Buffer) => (output += d));
  const url = `http://127.0.0.1:${options.port}`;
  await waitHealthy(child, `${url}/v1/models`, () => output);
  return { target: { name: "llama-cpp-python", baseURL: `${url}/v1`, key: "none", model: options.modelId }, stop: () => kill(child) };
}

/** The peer's path if its script finds it already built or installed (the script exits early then; it never builds here). */
function builtPeer(script: string): string | null {
  const result = spawnSync("bash", [join(ROOT, "bench/peers", script)], {
    encoding: "utf8",
    env: { ...process.env, SWITCHYARD_PEER_CHECK_ONLY: "1" },
  });
  const path = result.stdout.trim().split("\n").at(-1) ?? "";
  return result.status === 0 && existsSync(path) ? path : null;
}

async function waitHealthy(child: ChildProcess, url: string, output: () => string): Promise<void> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${url}: the server exited early:\n${output()}`);
    const response = await fetch(url).catch(() => undefined);
    if (response?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${url}: not healthy within 180 s:\n${output()}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(timer);
}
