import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
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
 */
export interface SharedServer extends ServerAddress {
  /** The account the key belongs to (unique to this caller). */
  account: string;
  /** A key of a new account named after `name` (unique per call), with the admin API's key fields (rpm_limit, manage_keys, ...). */
  newKey(name: string, fields?: Record<string, unknown>): Promise<{ key: string; account: string }>;
  /** Nothing to stop: the server outlives this file and stops with the test run. Kept so `after` reads as for startServer. */
  stop(): Promise<void>;
}

export interface SharedOptions {
  models?: string[];
  env?: Record<string, string>;
}

export async function sharedServer(options: SharedOptions = {}): Promise<SharedServer> {
  const models = options.models ?? [SMOLLM2];
  const env = { SWITCHYARD_LOG_LEVEL: "warn", ...TEST_ENGINE, ...options.env };
  const config = createHash("sha256").update(JSON.stringify({ models, env })).digest("hex").slice(0, 12);
  const owner = process.env.NODE_TEST_CONTEXT ? process.ppid : process.pid;
  const stateDir = join(tmpdir(), `switchyard-shared-${owner}-${config}`);
  const { url, dataDir } = await withLock(
    `${stateDir}.lock`,
    async () => (await running(stateDir)) ?? (await start(stateDir, owner, models, env)),
  );
  const server: SharedServer = {
    url,
    baseURL: `${url}/v1/compat`,
    dataDir,
    key: "",
    account: "",
    async newKey(name, fields = {}) {
      const account = `${name}-${randomBytes(4).toString("hex")}`;
      const created = await adminCall(server, "POST", "/admin/v1/keys", { account, ...fields });
      if (created.status !== 201) throw new Error(`creating a key for ${account}: ${created.status} ${JSON.stringify(created.body)}`);
      return { key: created.body.key as string, account };
    },
    async stop() {},
  };
  const own = await server.newKey("tester");
  server.key = own.key;
  server.account = own.account;
  return server;
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
 * Starts the server under a watchdog shell that outlives this process: it waits while the owner
 * (the test runner) and the server live, then stops the server and removes its data dir and state.
 */
async function start(stateDir: string, owner: number, models: string[], env: Record<string, string>): Promise<State> {
  mkdirSync(stateDir, { recursive: true });
  const { dataDir } = await freshDataDir({});
  const log = `${dataDir}.log`;
  // The state file goes with the server only while it still names this one (a dead server's is replaced).
  const watchdog =
    '"$1" "$2" serve --port 0 --data-dir "$3" --models "$4" & s=$!; ' +
    'while kill -0 "$5" 2>/dev/null && kill -0 $s 2>/dev/null; do sleep 1; done; ' +
    'kill $s 2>/dev/null; wait $s; grep -qF "$3" "$6/state.json" 2>/dev/null && rm -rf "$6"; rm -rf "$3" "$3.log"';
  const out = openSync(log, "a");
  spawn("sh", ["-c", watchdog, "watchdog", process.execPath, CLI, dataDir, models.join(","), String(owner), stateDir], {
    env: { ...process.env, ...env },
    stdio: ["ignore", out, out],
    detached: true,
  }).unref();
  const url = await waitFor(async () => {
    const file = join(dataDir, "server.json");
    if (!existsSync(file)) return undefined;
    const { url } = JSON.parse(readFileSync(file, "utf8")) as { url: string };
    const health = await fetch(`${url}/health`).catch(() => undefined);
    return health?.status === 200 ? url : undefined;
  }, 120_000).catch((error: Error) => {
    throw new Error(`the shared server did not start: ${error.message}\n${readFileSync(log, "utf8")}`);
  });
  const state = { url, dataDir };
  writeFileSync(join(stateDir, "state.json"), JSON.stringify(state));
  return state;
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
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
