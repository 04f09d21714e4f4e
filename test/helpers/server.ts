import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, existsSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../..");
export const CLI = join(ROOT, "bin/switchyard.js");
export const SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct";
/**
 * A `logit_bias` that bans every token SmolLM2 ends a generation with (llama.cpp's end-of-generation
 * set for it: `<|endoftext|>` 0, `<|im_end|>` 2 and `<file_sep>` 4), so a stream runs to its
 * max_tokens. Banning only 0 and 2 let a long sampled run end with 4 now and then.
 */
export const SMOLLM2_NO_END: Record<string, number> = { "0": -100, "2": -100, "4": -100 };
export const GEMMA = "google/gemma-3-270m";

/**
 * What every test server runs with unless a test says otherwise:
 * - 2,048 tokens a request: llama.cpp allocates and clears every sequence's KV cells when a server
 *   starts, and at the default 8,192 that cleared 1.5 GB for SmolLM2 alone, about 2.5 s of CPU a
 *   start over the suite's hundred-odd starts. Tests of long prompts, long streams or the default
 *   window's size start with `FULL_CONTEXT`.
 * - Two shards of one llama.cpp thread each. By default a shard alone on a model steps on every
 *   core, and ggml's threads wait for each other in a spin loop: with two test files running at
 *   once on two cores, that spin took 40% of the CPU (two heavy files side by side: 217 s of CPU
 *   and 117 s against 121 s and 70 s with one thread a shard). Shards of one thread never wait.
 */
export const TEST_ENGINE = { SWITCHYARD_MAX_CONTEXT: "2048", SWITCHYARD_THREADS: "1", SWITCHYARD_SHARDS: "2" } as const;
export const FULL_CONTEXT = { SWITCHYARD_MAX_CONTEXT: "8192" } as const;

/** Where a test reaches a server, and the key it uses there: a server of its own or the shared one (shared-server.ts). */
export interface ServerAddress {
  url: string;
  /** Base URL for OpenAI clients: `${url}/v1/compat`. */
  baseURL: string;
  key: string;
  dataDir: string;
}

export interface RunningServer extends ServerAddress {
  process: ChildProcess;
  logs: () => string;
  stop(): Promise<void>;
}

/** A call to the server's admin API (`/admin/v1/...`) with the admin token it wrote to its data dir's server.json. */
export async function adminCall(
  server: Pick<ServerAddress, "url" | "dataDir">,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const { adminToken } = JSON.parse(readFileSync(join(server.dataDir, "server.json"), "utf8")) as { adminToken: string };
  const headers: Record<string, string> = { authorization: `Bearer ${adminToken}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

/** Runs one CLI command to completion; throws with its output if it fails. */
export function cli(args: string[], env: NodeJS.ProcessEnv = {}): string {
  const result = spawnSync(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`switchyard ${args.join(" ")} failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/**
 * Creates a key for `account` (and the account if it is new) through the running server's admin
 * API; `fields` as `POST /admin/v1/keys` takes them (`budget_usd`, `rpm_limit`, `allowed_models`,
 * `manage_deployments`, ...). Where a server runs, this is what `keys create` does too, without
 * the CLI's process: about 0.7 s of CPU a key (the CLI itself is tested in keys-cli.test.ts).
 */
export async function adminKey(
  server: Pick<ServerAddress, "url" | "dataDir">,
  account: string,
  fields: Record<string, unknown> = {},
): Promise<string> {
  const created = await adminCall(server, "POST", "/admin/v1/keys", { account, ...fields });
  if (created.status !== 201) throw new Error(`creating a key for ${account}: ${created.status} ${JSON.stringify(created.body)}`);
  return created.body.key as string;
}

/** Creates a key for `account` through the CLI and returns it (the last line of output). */
export function createKey(dataDir: string, account: string, extra: string[] = [], env: NodeJS.ProcessEnv = {}): string {
  const lines = cli(["keys", "create", "--account", account, "--data-dir", dataDir, ...extra], env)
    .trim()
    .split("\n");
  return lines[lines.length - 1]!.trim();
}

/**
 * Starts the real server (the built CLI) on a random port with a fresh data dir, and waits until
 * its models are loaded. The models come from the shared models cache pulled by the test setup.
 */
export interface StartOptions {
  models?: string[];
  env?: NodeJS.ProcessEnv;
  /** Serve this data dir (a restart) instead of a fresh one; it is then left in place by stop(). */
  dataDir?: string;
  /** The key to use on a restart; without it a new key is created for account `tester`. */
  key?: string;
  /** Extra `keys create` flags for the new key (e.g. --budget). */
  keyArgs?: string[];
}

/**
 * A directory made once per machine by `make` and kept in the temp dir as `name`: a test process
 * makes it beside and renames it into place, and loses that race harmlessly to one made meanwhile.
 * Test servers and test databases start from copies of such directories (initdb took ~7 s).
 */
export async function keptTemplate(name: string, make: (dir: string) => Promise<void> | void): Promise<string> {
  const dir = join(tmpdir(), name);
  if (!existsSync(join(dir, "ready"))) {
    const making = mkdtempSync(join(tmpdir(), `${name}-making-`));
    await make(making);
    writeFileSync(join(making, "ready"), "");
    try {
      renameSync(making, dir);
    } catch {
      rmSync(making, { recursive: true, force: true }); // another test process made it first
    }
  }
  return dir;
}

/** What a template data dir depends on: the migrations and the PGlite release. */
function templateVersion(): string {
  return createHash("sha256")
    .update(readFileSync(join(ROOT, "dist/storage/migrations.js")))
    .update(readFileSync(join(ROOT, "node_modules/@electric-sql/pglite/package.json")))
    .digest("hex")
    .slice(0, 16);
}

/**
 * A data dir whose embedded database is created and migrated, with a key for account `tester`:
 * made by the real CLI (`keys create`), keyed by the migrations and the PGlite release, so every
 * test server on a fresh data dir starts from a copy.
 */
async function migratedTemplate(): Promise<{ dir: string; key: string }> {
  const dir = await keptTemplate(`switchyard-test-server-${templateVersion()}`, (making) =>
    writeFileSync(join(making, "key"), createKey(join(making, "data"), "tester"), { mode: 0o600 }),
  );
  return { dir: join(dir, "data"), key: readFileSync(join(dir, "key"), "utf8") };
}

/**
 * A new data dir whose embedded database is created and migrated but holds no account or key: a
 * copy of a template the real CLI made once (`keys list` on an empty dir), so a test that makes its
 * own keys there skips initdb and the migrations (about 6.5 s of CPU, against 2 s for the copy and
 * the `keys create` that follows). `serve` on it makes its first key as on a fresh install.
 */
export function emptyDataDir(prefix = "switchyard-test-"): string {
  const template = join(tmpdir(), `switchyard-test-empty-${templateVersion()}`);
  if (!existsSync(join(template, "ready"))) {
    const making = mkdtempSync(`${template}-making-`);
    cli(["keys", "list", "--data-dir", join(making, "data")]);
    writeFileSync(join(making, "ready"), "");
    try {
      renameSync(making, template);
    } catch {
      rmSync(making, { recursive: true, force: true }); // another test process made it first
    }
  }
  const dataDir = mkdtempSync(join(tmpdir(), prefix));
  execFileSync("cp", ["-a", `${join(template, "data")}/.`, dataDir]); // -a: the owner-only modes come along
  return dataDir;
}

/** A new data dir and its key: a copy of a migrated template unless another database or a given key is asked for. */
export async function freshDataDir(options: StartOptions): Promise<{ dataDir: string; key: string }> {
  const external = Boolean(options.env?.SWITCHYARD_DATABASE_URL) || options.key !== undefined;
  if (external) {
    const dataDir = mkdtempSync(join(tmpdir(), "switchyard-test-"));
    return { dataDir, key: options.key ?? createKey(dataDir, "tester", options.keyArgs ?? [], options.env) };
  }
  if (options.keyArgs !== undefined) {
    const dataDir = emptyDataDir();
    return { dataDir, key: createKey(dataDir, "tester", options.keyArgs, options.env) };
  }
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-test-"));
  const template = await migratedTemplate();
  execFileSync("cp", ["-a", `${template.dir}/.`, dataDir]); // -a: the owner-only modes come along
  return { dataDir, key: template.key };
}

/** Children the test process started and has not seen exit. */
const children = new Set<ChildProcess>();
process.once("exit", () => children.forEach((child) => child.kill("SIGKILL")));

/**
 * A spawned server or receiver is killed when the test process exits. A test that fails before its
 * `stop()` leaves the child running; `npm test` passes --test-force-exit, so the file's process
 * ends once its tests have, and the child goes with it rather than keep the whole run waiting.
 */
export function reapOnExit(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const ownDir = options.dataDir === undefined;
  const fresh = ownDir ? await freshDataDir(options) : undefined;
  const dataDir = fresh?.dataDir ?? options.dataDir!;
  const key = fresh?.key ?? options.key ?? createKey(dataDir, "tester", options.keyArgs ?? [], options.env);
  let output = "";
  const child = reapOnExit(
    spawn(process.execPath, [CLI, "serve", "--port", "0", "--data-dir", dataDir, "--models", (options.models ?? [SMOLLM2]).join(",")], {
      env: { ...process.env, SWITCHYARD_LOG_LEVEL: "warn", ...TEST_ENGINE, ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));

  const url = await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`server exited early:\n${output}`);
    const file = join(dataDir, "server.json");
    if (!existsSync(file)) return undefined;
    const server = JSON.parse(readFileSync(file, "utf8")) as { url: string; pid: number };
    if (server.pid !== child.pid) return undefined; // a file a killed server left behind
    const health = await fetch(`${server.url}/health`).catch(() => undefined);
    return health?.status === 200 ? server.url : undefined;
  }, 120_000);

  return {
    url,
    baseURL: `${url}/v1/compat`,
    key,
    dataDir,
    process: child,
    logs: () => output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
      if (ownDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** POSTs a chat request with the given key (raw fetch, to see statuses and headers exactly). */
export function postChat(
  server: Pick<ServerAddress, "baseURL" | "key">,
  body: unknown,
  init: { key?: string | null; headers?: Record<string, string>; signal?: AbortSignal } = {},
) {
  const headers: Record<string, string> = { "content-type": "application/json", ...init.headers };
  const key = init.key === undefined ? server.key : init.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  return fetch(`${server.baseURL}/chat/completions`, {
    method: "POST",
    headers,
    body: typeof body === "string" ? body : JSON.stringify(body),
    signal: init.signal,
  });
}

/** Reads an SSE response into its `data:` payloads, in order. */
export async function readSse(response: Response): Promise<string[]> {
  const text = await response.text();
  return text
    .split("\n\n")
    .filter((e) => e.trim().length > 0)
    .map((e) => {
      if (!e.startsWith("data: ")) throw new Error(`not a data event: ${JSON.stringify(e)}`);
      return e.slice("data: ".length);
    });
}

export interface TimedEvent {
  /** performance.now() when the event was read. */
  at: number;
  data: string;
}

/** Reads an SSE response event by event, stamping each with the time it arrived. */
export async function readSseTimed(response: Response, onEvent?: (event: TimedEvent) => void): Promise<TimedEvent[]> {
  const events: TimedEvent[] = [];
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of response.body as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!raw.startsWith("data: ")) throw new Error(`not a data event: ${JSON.stringify(raw)}`);
      const event = { at: performance.now(), data: raw.slice("data: ".length) };
      events.push(event);
      onEvent?.(event);
    }
  }
  return events;
}

/** The text of a stream's content deltas, joined. */
export function streamedContent(events: readonly TimedEvent[]): string {
  return events
    .filter((e) => e.data !== "[DONE]")
    .map((e) => JSON.parse(e.data).choices?.[0]?.delta?.content ?? "")
    .join("");
}
