/**
 * Issue 30 item 3: can one key's idle kept-alive connections keep others out? One attacker key
 * opens many connections on loopback (as many as it is allowed, up to --connections), each sends
 * one `GET /v1/models` and then sits idle, as the probe did with ~19,850. Meanwhile another
 * account's `GET /v1/models` and 8-token chat, and `/health`, each on a fresh connection, are timed
 * quiet and then beside the held connections; the server's descriptors are counted in each phase.
 *
 *   node --import tsx bench/stall-connections.ts [--connections 2000] [--fd-limit 1500] [--before]
 *
 * --fd-limit lowers the server's open-file limit (prlimit, after it starts) to what a smaller machine
 * has, so a few thousand connections can exhaust it; the total cap is then what the server derives
 * from that limit. --before lifts the per-key, per-account and total caps (and keeps the 72 s
 * keep-alive), replaying the behaviour before connections were capped. --per-key 100000 lets the
 * one key hold the most any key may (the total less the reserve), so new connections must close
 * its idle ones to get in.
 * Prints a table; writes bench/results/stall-connections-<time>.json. Stops by itself: every
 * connection it opens is closed at the end, and each attempt gives up after 10 s.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { dirname } from "node:path";
import { Command } from "commander";
import { connectionCaps, loadSettings } from "../src/config/settings.js";
import { streamChat, type Target } from "./load/client-stream.js";
import { randomPrompts } from "./load/datasets.js";
import { summarize, type Summary } from "./load/stats.js";
import { cpuDescription, startSwitchyard } from "./peers/targets.js";

const MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct";
const ADMIN = `sy-admin-stall-connections-${"x".repeat(24)}`;
const opts = new Command()
  .option("--connections <n>", "connections the attacker key tries to hold (at most 5000)", "2000")
  .option("--fd-limit <n>", "lower the server's open-file limit to this after it starts")
  .option("--before", "lift the connection caps: the behaviour before they existed")
  .option(
    "--per-key <n>",
    "SWITCHYARD_MAX_CONNECTIONS_PER_KEY and _PER_ACCOUNT for the server (it clamps them to the total less the reserve)",
  )
  .option("--samples <n>", "requests of each kind per phase", "20")
  .option("--port <n>", "the server's port", "18620")
  .option("--out <file>", "where the JSON goes", `bench/results/stall-connections-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
  .parse()
  .opts<{ connections: string; fdLimit?: string; before?: boolean; perKey?: string; samples: string; port: string; out: string }>();
const CONNECTIONS = Math.min(5000, Number(opts.connections));
const SAMPLES = Number(opts.samples);
const PORT = Number(opts.port);
const ATTEMPT_MS = 10_000;

/** Without caps: a total above any descriptor limit, and per-key and per-account caps as large. */
const UNCAPPED = {
  SWITCHYARD_MAX_CONNECTIONS: "1000000",
  SWITCHYARD_MAX_CONNECTIONS_PER_KEY: "1000000",
  SWITCHYARD_MAX_CONNECTIONS_PER_ACCOUNT: "1000000",
};

/** The total the server would derive had it started under `fdLimit` (it started under the machine's). */
function cappedFor(fdLimit: number): NodeJS.ProcessEnv {
  return { SWITCHYARD_MAX_CONNECTIONS: String(connectionCaps(loadSettings({}, {}), fdLimit).total) };
}

interface Reply {
  status: number;
  ms: number;
  socket: Socket;
}

/** A fresh connection and one request on it; status 0 when it was reset, refused or not answered in time. */
function request(path: string, key?: string): Promise<Reply> {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = connect(PORT, "127.0.0.1");
    let text = "";
    const done = (status: number) => {
      clearTimeout(timer);
      socket.removeAllListeners("data");
      resolve({ status, ms: performance.now() - started, socket });
    };
    const timer = setTimeout(() => done(0), ATTEMPT_MS);
    socket.setEncoding("utf8");
    socket.on("error", () => done(0));
    socket.once("close", () => done(0));
    socket.on("data", (chunk: string) => {
      text += chunk;
      const split = text.indexOf("\r\n\r\n");
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, split));
      if (split !== -1 && length && Buffer.byteLength(text.slice(split + 4)) >= Number(length[1])) done(Number(text.slice(9, 12)));
    });
    const auth = key ? `Authorization: Bearer ${key}\r\n` : "";
    socket.write(`GET ${path} HTTP/1.1\r\nHost: bench\r\n${auth}\r\n`);
  });
}

async function keyFor(account: string): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${PORT}/admin/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify({ account, name: "bench" }),
  });
  return ((await response.json()) as { key: string }).key;
}

interface Phase {
  models: Summary;
  health: Summary;
  chatTtft: Summary;
  failed: { models: number; health: number; chat: number };
  descriptors: number;
}

/** The other account's requests, one after another, each kind on fresh connections. */
async function measure(target: Target, pid: number, seed: number): Promise<Phase> {
  const models: number[] = [];
  const health: number[] = [];
  const ttft: number[] = [];
  const failed = { models: 0, health: 0, chat: 0 };
  const prompts = randomPrompts(SAMPLES, 32, seed);
  for (let i = 0; i < SAMPLES; i++) {
    for (const [path, key, into, kind] of [
      ["/v1/models", target.key, models, "models"],
      ["/health", undefined, health, "health"],
    ] as const) {
      const reply = await request(path, key);
      reply.socket.destroy();
      if (reply.status === 200) into.push(reply.ms);
      else failed[kind]++;
    }
    const chat = await streamChat(target, prompts[i]!, 8, undefined);
    if (chat.ok && chat.ttftMs !== undefined) ttft.push(chat.ttftMs);
    else failed.chat++;
  }
  return { models: summarize(models), health: summarize(health), chatTtft: summarize(ttft), failed, descriptors: descriptors(pid) };
}

const descriptors = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

/** The attacker's connections: opened 50 at a time, those answered 200 kept open and idle. */
class Holder {
  readonly held: Socket[] = [];
  readonly statuses: Record<string, number> = {};
  constructor(private readonly key: string) {}

  get open(): number {
    return this.held.filter((s) => !s.destroyed && !s.readableEnded).length;
  }

  async openMore(count: number): Promise<void> {
    for (let opened = 0; opened < count; opened += 50) {
      const replies = await Promise.all(Array.from({ length: Math.min(50, count - opened) }, () => request("/v1/models", this.key)));
      for (const reply of replies) {
        this.statuses[reply.status] = (this.statuses[reply.status] ?? 0) + 1;
        if (reply.status === 200) this.held.push(reply.socket.on("error", () => undefined));
        else reply.socket.destroy();
      }
    }
  }

  /** Until `done`, replaces the connections the server closed (idle timeout, eviction), up to `target`. */
  async keep(target: number, done: Promise<unknown>): Promise<void> {
    let stop = false;
    void done.then(() => (stop = true));
    while (!stop) {
      await this.openMore(Math.max(0, target - this.open));
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  close(): void {
    for (const socket of this.held) socket.destroy();
  }
}

const fdLimit = opts.fdLimit ? Number(opts.fdLimit) : undefined;
const perKey = opts.perKey ? { SWITCHYARD_MAX_CONNECTIONS_PER_KEY: opts.perKey, SWITCHYARD_MAX_CONNECTIONS_PER_ACCOUNT: opts.perKey } : {};
const env = { SWITCHYARD_ADMIN_KEY: ADMIN, ...perKey, ...(opts.before ? UNCAPPED : fdLimit ? cappedFor(fdLimit) : {}) };
const server = await startSwitchyard(
  { modelId: MODEL, modelPath: "", threads: 2, parallel: 8, contextPerSequence: 2048, port: PORT },
  "switchyard",
  env,
);
const pid = server.target.pid!;
let holder: Holder | undefined;
try {
  if (fdLimit) execFileSync("prlimit", ["--pid", String(pid), `--nofile=${fdLimit}:${fdLimit}`]);
  const attacker = await keyFor("attacker");
  const bystander: Target = { ...server.target, key: await keyFor("bystander"), model: MODEL };
  await measure(bystander, pid, 1); // warm: the first requests after a start are not what is measured
  const quiet = await measure(bystander, pid, 2);
  holder = new Holder(attacker);
  await holder.openMore(CONNECTIONS);
  const heldAfterAttack = holder.open;
  const fdsAfterAttack = descriptors(pid);
  // The attacker keeps what it was allowed while the other account is measured.
  let measured!: () => void;
  const keeping = holder.keep(heldAfterAttack, new Promise<void>((resolve) => (measured = resolve)));
  const during = await measure(bystander, pid, 3);
  const heldAtEnd = holder.open;
  measured();
  await keeping;
  holder.close();
  const after = await measure(bystander, pid, 4);
  const phases = { quiet, during, after };
  const row = (name: string, p: Phase) => ({
    phase: name,
    "server fds": p.descriptors,
    "models p50/p99 ms": `${p.models.p50.toFixed(1)} / ${p.models.p99.toFixed(1)}`,
    "health p50/p99 ms": `${p.health.p50.toFixed(1)} / ${p.health.p99.toFixed(1)}`,
    "chat TTFT p50/p99 ms": `${p.chatTtft.p50.toFixed(0)} / ${p.chatTtft.p99.toFixed(0)}`,
    "failed models/health/chat": `${p.failed.models}/${p.failed.health}/${p.failed.chat}`,
  });
  console.table([
    row("quiet", quiet),
    row(`beside ${heldAfterAttack} idle connections of one key`, during),
    row("after they closed", after),
  ]);
  const attack = { tried: CONNECTIONS, statuses: holder.statuses, heldAfterAttack, heldAtEnd, fdsAfterAttack };
  console.log(
    `attacker: ${JSON.stringify(attack)}; caps: ${opts.before ? "lifted (--before)" : "on"}; server fd limit: ${fdLimit ?? "the machine's"}`,
  );
  mkdirSync(dirname(opts.out), { recursive: true });
  writeFileSync(
    opts.out,
    JSON.stringify(
      { at: new Date().toISOString(), cpu: cpuDescription(), before: Boolean(opts.before), fdLimit: fdLimit ?? null, env, attack, phases },
      null,
      2,
    ),
  );
  console.log(`wrote ${opts.out}`);
} finally {
  holder?.close();
  await server.stop();
}
