import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminCall, CLI, freshDataDir, SMOLLM2, TEST_ENGINE, waitFor, type ServerAddress } from "./server.js";

/**
 * One server shared by the test files of a run that need the same configuration, instead of one
 * each: node's test runner (Node 20 has no global setup) runs each file in its own process, so the
 * first file to ask starts it, under a lock, and the others find it by a state file keyed by the
 * runner's pid and the configuration. A watchdog shell is the server's parent and stops it, and
 * removes its data dir, within a second of the runner's exit. A file run without the runner
 * (`node --import tsx x.test.ts`) owns its server alone, stopped when it exits.
 *
 * Each call gets an account of its own and its key, so usage, stored objects, limits and lists are
 * the caller's alone. What a shared server cannot isolate: /health's counts and /metrics (another
 * file's requests run beside), the server's logs, stopping or killing it, settings, a fresh data
 * dir, and failed admin-token attempts (the admin lockout counts per client IP). A test that needs
 * any of those starts its own with startServer().
 *
 * `exclusive: true` leases a server to one file at a time instead: a pool per configuration, each
 * server held by the pid of the file using it until that file calls stop() or exits, and a new one
 * started only when every one of the pool is held (so at most one per test worker). Nothing else
 * runs on it meanwhile, so /health's running and waiting counts, batch composition and greedy
 * outputs are the file's own, and logs() is what the server wrote since the lease began; the
 * engine's cumulative counts (steps, preemptions, /metrics) carry earlier files' work, so a test
 * reads them as differences. Stopping or killing it, settings and a fresh data dir still need
 * startServer().
 */
export interface SharedServer extends ServerAddress {
  /** The account the key belongs to (unique to this caller). */
  account: string;
  /** A key of a new account named after `name` (unique per call), with the admin API's key fields (rpm_limit, manage_keys, ...). */
  newKey(name: string, fields?: Record<string, unknown>): Promise<{ key: string; account: string }>;
  /** What the server has logged: since the lease began when exclusive, else every file's. */
  logs(): string;
  /** The server outlives this file and stops with the test run; an exclusive lease is given back. */
  stop(): Promise<void>;
}

export interface SharedOptions {
  models?: string[];
  env?: Record<string, string>;
  /** A server of the pool that no other file uses until this one calls stop() or exits. */
  exclusive?: boolean;
}

export async function sharedServer(options: SharedOptions = {}): Promise<SharedServer> {
  const models = options.models ?? [SMOLLM2];
  const env = { SWITCHYARD_LOG_LEVEL: "warn", ...TEST_ENGINE, ...options.env };
  const config = createHash("sha256").update(JSON.stringify({ models, env })).digest("hex").slice(0, 12);
  const owner = process.env.NODE_TEST_CONTEXT ? process.ppid : process.pid;
  const base = join(tmpdir(), `switchyard-shared-${owner}-${config}`);
  const boot = async (stateDir: string) => (await running(stateDir)) ?? (await start(stateDir, owner, models, env));
  const slot = options.exclusive ? await withLock(`${base}-x.lock`, async () => lease(base)) : undefined;
  const { url, dataDir } = slot ? await boot(slot) : await withLock(`${base}.lock`, async () => boot(base));
  const log = `${dataDir}.log`;
  const from = slot ? statSync(log).size : 0;
  const server: SharedServer = {
    url,
    baseURL: `${url}/v1/compat`,
    dataDir,
    key: "",
    account: "",
    logs: () => readFileSync(log).subarray(from).toString(),
    async newKey(name, fields = {}) {
      const account = `${name}-${randomBytes(4).toString("hex")}`;
      const created = await adminCall(server, "POST", "/admin/v1/keys", { account, ...fields });
      if (created.status !== 201) throw new Error(`creating a key for ${account}: ${created.status} ${JSON.stringify(created.body)}`);
      return { key: created.body.key as string, account };
    },
    async stop() {
      if (slot) await release(slot, url);
    },
  };
  const own = await server.newKey("tester");
  server.key = own.key;
  server.account = own.account;
  return server;
}

/**
 * Takes the first slot of the pool that no live process holds (`<base>-x<i>/lease` names its
 * holder's pid), making a new slot when all are held; its server is started after the pool's lock
 * is let go, so a start holds up no file that finds an idle one.
 */
function lease(base: string): string {
  for (let i = 0; ; i++) {
    const slot = `${base}-x${i}`;
    mkdirSync(slot, { recursive: true });
    const holder = readFileSync(join(slot, "lease"), { encoding: "utf8", flag: "a+" });
    if (holder !== "" && holder !== String(process.pid) && alive(Number(holder))) continue;
    writeFileSync(join(slot, "lease"), String(process.pid));
    leases.set(slot, (leases.get(slot) ?? 0) + 1);
    return slot;
  }
}

/** This process's leases: a file whose suites each take one shares its slot between them. */
const leases = new Map<string, number>();

/** Gives a lease back once its server has nothing running, waiting or paused, so the next file finds it idle. */
async function release(slot: string, url: string): Promise<void> {
  const left = (leases.get(slot) ?? 1) - 1;
  leases.set(slot, left);
  if (left > 0) return;
  const idle = async () => {
    const body = (await (await fetch(`${url}/health`)).json()) as { models: Array<Record<string, number>> };
    return body.models.every((m) => !m.running && !m.waiting && !m.paused) ? true : undefined;
  };
  await waitFor(idle, 120_000).catch(() => undefined); // the next file's own checks see what is left
  const file = join(slot, "lease");
  if (existsSync(file) && readFileSync(file, "utf8") === String(process.pid)) rmSync(file, { force: true });
}

interface State {
  url: string;
  dataDir: string;
}

/** The server this state file names, if it answers. */
async function running(stateDir: string): Promise<State | undefined> {
  const file = join(stateDir, "state.json");
  if (!existsSync(file)) return undefined;
  const state = JSON.parse(readFileSync(file, "utf8")) as State;
  const health = await fetch(`${state.url}/health`).catch(() => undefined);
  return health?.status === 200 ? state : undefined;
}

/**
 * The watchdog: the server's parent, it waits while the owner (the test runner) and the server
 * live, then stops the server and removes its data dir, and its state only while that still names
 * this server (a dead server's is replaced). `kill -0` alone succeeds on a zombie: a runner that
 * has exited but that its parent has not reaped (or a parent that never reaps) would keep the
 * server up for good, so a process whose /proc state is Z counts as gone.
 */
const WATCHDOG = [
  'alive() { kill -0 "$1" 2>/dev/null || return 1; read -r stat < "/proc/$1/stat" 2>/dev/null || return 0; case $stat in *") Z "*) return 1;; esac; }',
  '"$1" "$2" serve --port 0 --data-dir "$3" --models "$4" & s=$!',
  'while alive "$5" && alive $s; do sleep 1; done',
  'kill $s 2>/dev/null; wait $s; grep -qF "$3" "$6/state.json" 2>/dev/null && rm -rf "$6"; rm -rf "$3" "$3.log"',
].join("\n");

/**
 * Starts the server under the watchdog, which outlives this process. A start that fails (the
 * server exits, or is not healthy in time) leaves nothing: its process group is killed and its data
 * dir, log and state dir (or pool slot) removed, and the error carries what the server printed.
 */
async function start(stateDir: string, owner: number, models: string[], env: Record<string, string>): Promise<State> {
  mkdirSync(stateDir, { recursive: true });
  const { dataDir } = await freshDataDir({});
  const log = `${dataDir}.log`;
  // Kept open here: the watchdog removes the log of a server that died, and an open file can still be read.
  const out = openSync(log, "a+");
  const watchdog = spawn("sh", ["-c", WATCHDOG, "watchdog", process.execPath, CLI, dataDir, models.join(","), String(owner), stateDir], {
    env: { ...process.env, ...env },
    stdio: ["ignore", out, out],
    detached: true,
  });
  watchdog.unref();
  let exited = false;
  watchdog.once("exit", () => (exited = true));
  try {
    const url = await waitFor(async () => {
      if (exited) throw new Error("it exited");
      return healthyUrl(dataDir);
    }, 120_000);
    const state = { url, dataDir };
    writeFileSync(join(stateDir, "state.json"), JSON.stringify(state));
    return state;
  } catch (error) {
    const output = readWhole(out);
    try {
      process.kill(-watchdog.pid!, "SIGKILL");
    } catch {
      // the group has already gone
    }
    for (const path of [dataDir, log, stateDir]) rmSync(path, { recursive: true, force: true });
    leases.delete(stateDir);
    throw new Error(`the shared server did not start: ${(error as Error).message}\n${output}`);
  } finally {
    closeSync(out);
  }
}

/** The URL that the server on `dataDir` wrote to its server.json, once it answers /health. */
async function healthyUrl(dataDir: string): Promise<string | undefined> {
  const file = join(dataDir, "server.json");
  if (!existsSync(file)) return undefined;
  const { url } = JSON.parse(readFileSync(file, "utf8")) as { url: string };
  const health = await fetch(`${url}/health`).catch(() => undefined);
  return health?.status === 200 ? url : undefined;
}

/** What an open file holds, read from its start whatever its offset (the watchdog shares it). */
function readWhole(fd: number): string {
  const bytes = Buffer.alloc(fstatSync(fd).size);
  readSync(fd, bytes, 0, bytes.length, 0);
  return bytes.toString();
}

/** Runs `work` holding a lock directory; a lock whose holder died is taken over. */
async function withLock<T>(lock: string, work: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      if (!holderAlive(lock)) rmSync(lock, { recursive: true, force: true });
      else await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return await work();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function holderAlive(lock: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(lock, "pid"), "utf8"));
  } catch {
    // Just made, its pid not yet written; a holder that died before writing it left it for good.
    return Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? 0) < 10_000;
  }
  return alive(pid);
}

/** Whether `pid` runs: signal 0 reaches a zombie too, so a process whose /proc state is Z (exited, unreaped) does not count. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat[stat.lastIndexOf(") ") + 2] !== "Z";
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ENOENT"; // no /proc here: signal 0 is all there is
  }
}
