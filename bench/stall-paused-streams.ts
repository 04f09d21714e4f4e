/**
 * Issue 30 item 4: do streams whose client never reads stall another account? One account opens
 * 12 streaming chats (n=8, max_tokens=3000) on raw sockets it never reads; another account sends
 * short chats (8 tokens) one after another, quiet first and then beside the unread streams. The
 * ratio of its TTFT p99 (beside / quiet) is what to read; target: within 2x.
 *
 *   node --import tsx bench/stall-paused-streams.ts [--grace <ms>] [--chats <n>]
 *
 * --grace sets SWITCHYARD_STREAM_PAUSE_GRACE_MS (default: the server's); a grace past the pause
 * timeout (e.g. 3600000) replays the behaviour before paused streams were preempted.
 * Prints a table; writes bench/results/stall-paused-streams-<time>.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { dirname } from "node:path";
import { Command } from "commander";
import { streamChat, type RequestResult, type Target } from "./load/client-stream.js";
import { randomPrompts } from "./load/datasets.js";
import { summarize } from "./load/stats.js";
import { cpuDescription, cpuVariant, startSwitchyard } from "./peers/targets.js";

const MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct";
const ADMIN = `sy-admin-paused-streams-${"x".repeat(24)}`;
const opts = new Command()
  .option("--grace <ms>", "SWITCHYARD_STREAM_PAUSE_GRACE_MS for the server")
  .option("--chats <n>", "the other account's chats in each phase", "20")
  .option("--streams <n>", "unread streams", "12")
  .option("--port <n>", "the server's port", "18610")
  .option(
    "--out <file>",
    "where the JSON goes",
    `bench/results/stall-paused-streams-${new Date().toISOString().replace(/[:.]/g, "-")}.json`,
  )
  .parse()
  .opts<{ grace?: string; chats: string; streams: string; port: string; out: string }>();
const CHATS = Number(opts.chats);
const STREAMS = Number(opts.streams);

const server = await startSwitchyard(
  { modelId: MODEL, modelPath: "", threads: 2, parallel: 8, contextPerSequence: 4096, port: Number(opts.port) },
  "switchyard",
  {
    SWITCHYARD_ADMIN_KEY: ADMIN,
    ...(opts.grace ? { SWITCHYARD_STREAM_PAUSE_GRACE_MS: opts.grace } : {}),
  },
);
const base = server.target.baseURL.replace(/\/v1\/compat$/, "");

async function keyFor(account: string): Promise<string> {
  const response = await fetch(`${base}/admin/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify({ account, name: "bench" }),
  });
  return ((await response.json()) as { key: string }).key;
}

interface EngineHealth {
  running: number;
  waiting: number;
  paused: number;
  preemptions: number;
}
const health = async () => ((await (await fetch(`${base}/health`)).json()) as { models: EngineHealth[] }).models[0]!;

/** A streaming request on a socket that is never read: the attack. */
function unreadStream(key: string): Promise<Socket> {
  const body = JSON.stringify({
    model: MODEL,
    messages: [{ role: "user", content: "Write a very long story about a dragon." }],
    n: 8,
    max_tokens: 3000,
    temperature: 1,
    stream: true,
  });
  return new Promise((resolve, reject) => {
    const socket = connect(Number(opts.port), "127.0.0.1", () => {
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      socket.pause();
      resolve(socket);
    });
    socket.on("error", reject);
  });
}

/** The other account's 8-token chats, one after another. */
async function chats(target: Target, seed: number): Promise<RequestResult[]> {
  const results: RequestResult[] = [];
  for (const messages of randomPrompts(CHATS, 32, seed)) {
    const result = await streamChat(target, messages, 8, undefined);
    process.stderr.write(
      `chat ${results.length + 1}/${CHATS}: ${result.ok ? `TTFT ${result.ttftMs?.toFixed(0)} ms` : `failed ${result.status}`}\n`,
    );
    results.push(result);
  }
  return results;
}

const ttft = (results: RequestResult[]) => summarize(results.flatMap((r) => (r.ttftMs === undefined ? [] : [r.ttftMs])));

try {
  const attacker = await keyFor("attacker");
  const bystander: Target = { ...server.target, key: await keyFor("bystander"), model: MODEL };
  await chats(bystander, 1); // warm: the first requests after a start are not what is measured
  const quiet = await chats(bystander, 2);
  const sockets = await Promise.all(Array.from({ length: STREAMS }, () => unreadStream(attacker)));
  // The streams are admitted and fill their buffers before the other account starts.
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const samples: EngineHealth[] = [];
  const sampler = setInterval(() => void health().then((h) => samples.push(h)), 1000);
  const during = await chats(bystander, 3);
  clearInterval(sampler);
  for (const socket of sockets) socket.destroy();
  const end = await health();

  const rows = [
    { phase: "quiet", ok: quiet.filter((r) => r.ok).length, ...ttft(quiet) },
    { phase: `beside ${STREAMS} unread n=8 streams`, ok: during.filter((r) => r.ok).length, ...ttft(during) },
  ];
  console.table(
    rows.map((r) => ({
      phase: r.phase,
      ok: r.ok,
      "ttft p50 ms": r.p50.toFixed(0),
      "ttft p99 ms": r.p99.toFixed(0),
      "ttft mean ms": r.mean.toFixed(0),
    })),
  );
  const ratio = +(rows[1]!.p99 / rows[0]!.p99).toFixed(2);
  const most = (key: keyof EngineHealth) => Math.max(0, ...samples.map((s) => s[key]));
  const engine = { maxRunning: most("running"), maxPaused: most("paused"), maxWaiting: most("waiting"), preemptions: end.preemptions };
  console.log(`TTFT p99 beside / quiet: ${ratio}x (target: within 2x); engine while the other account ran: ${JSON.stringify(engine)}`);
  const cpu = cpuDescription();
  mkdirSync(dirname(opts.out), { recursive: true });
  writeFileSync(
    opts.out,
    JSON.stringify(
      {
        at: new Date().toISOString(),
        cpu,
        variant: cpuVariant(server.target.pid),
        grace: opts.grace ?? "default",
        streams: STREAMS,
        rows,
        ratio,
        engine,
      },
      null,
      2,
    ),
  );
  console.log(`wrote ${opts.out}`);
} finally {
  await server.stop();
}
