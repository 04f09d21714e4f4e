/**
 * Does one tenant's file work stall everyone else? (issue 30 item 1.) One server serves SmolLM2; a
 * bystander polls an unauthenticated `/health` every 20 ms and sends one short streamed chat after
 * another, first alone (quiet), then while another tenant uploads a large batch file (200 MB by
 * default), creates a batch from it and downloads it. The ratios (during / quiet) are what to read.
 *
 *   node --import tsx bench/stall-files.ts [--mb 200] [--chats 12]
 *
 * Prints a table; writes bench/results/stall-files-<time>.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { dirname } from "node:path";
import { Command } from "commander";
import OpenAI, { toFile } from "openai";
import { streamChat, type Target } from "./load/client-stream.js";
import { randomPrompts } from "./load/datasets.js";
import { summarize } from "./load/stats.js";
import { cpuDescription, startSwitchyard } from "./peers/targets.js";

/**
 * The attacker runs in a process of its own: building and sending a 200 MB form takes the client's
 * CPU, which must not show up as the server's stall in the bystander's figures.
 */
if (process.env.STALL_FILES_ATTACKER) {
  const { baseURL, key, model, bytes } = JSON.parse(process.env.STALL_FILES_ATTACKER) as {
    baseURL: string;
    key: string;
    model: string;
    bytes: number;
  };
  const attacker = new OpenAI({ apiKey: key, baseURL, timeout: 900_000, maxRetries: 0 });
  const file = attackFile(`${model}-not-served`, bytes);
  const windows: Array<[string, number, number]> = [];
  const timed = async <T>(name: string, work: () => Promise<T>) => {
    const start = performance.timeOrigin + performance.now();
    const result = await work();
    windows.push([name, start, performance.timeOrigin + performance.now()]);
    return result;
  };
  const uploaded = await timed("upload", async () => attacker.files.create({ file: await toFile(file, "attack.jsonl"), purpose: "batch" }));
  const batch = await timed("create_batch", () =>
    attacker.batches.create({ input_file_id: uploaded.id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
  );
  if (batch.status === "failed") throw new Error(`the batch failed: ${JSON.stringify(batch.errors)}`);
  await timed("cancel", () => attacker.batches.cancel(batch.id));
  await timed("until_cancelled", async () => {
    while ((await attacker.batches.retrieve(batch.id)).status !== "cancelled") await new Promise((resolve) => setTimeout(resolve, 200));
  });
  const downloaded = await timed("download", async () => {
    // Read as a stream, as a client saving the file would (arrayBuffer() would make the client hold 200 MB).
    let received = 0;
    for await (const chunk of (await attacker.files.content(uploaded.id)).body as unknown as AsyncIterable<Uint8Array>)
      received += chunk.byteLength;
    return received;
  });
  if (downloaded !== file.length) throw new Error(`downloaded ${downloaded} bytes of ${file.length}`);
  process.stdout.write(
    JSON.stringify({ windows, fileBytes: file.length, lines: (await attacker.batches.retrieve(batch.id)).request_counts?.total ?? 0 }),
  );
  process.exit(0);
}

/**
 * The attacker's file: chat lines of about 4 KB each, the most a 50,000-line batch allows at 200 MB.
 * They name a model the server does not serve, so the few lines that start before the cancel are
 * refused at once: what is measured is the file work, not the batch's inference.
 */
function attackFile(model: string, bytes: number): Buffer {
  const lineBytes = Math.max(512, Math.ceil(bytes / 49_000));
  const filler = "lorem ipsum ".repeat(Math.ceil(lineBytes / 12)).slice(0, lineBytes - 200);
  const lines: string[] = [];
  for (let i = 0, size = 0; size < bytes; i++) {
    const line = JSON.stringify({
      custom_id: `l${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model, messages: [{ role: "user", content: filler }], max_tokens: 1 },
    });
    lines.push(line);
    size += line.length + 1;
  }
  return Buffer.from(`${lines.join("\n")}\n`);
}

const opts = new Command()
  .option("--mb <n>", "size of the attacker's file in MB", "200")
  .option("--chats <n>", "bystander chats per phase (at least)", "12")
  .option("--out <file>", "where the JSON goes", `bench/results/stall-files-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
  .parse()
  .opts<{ mb: string; chats: string; out: string }>();
const MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct";
const ADMIN = `sy-admin-stall-files-${"x".repeat(24)}`;
const bytes = Number(opts.mb) * 1_000_000;

const server = await startSwitchyard(
  { modelId: MODEL, modelPath: "", threads: 2, parallel: 8, contextPerSequence: 2048, port: 18471 },
  "switchyard",
  {
    SWITCHYARD_ADMIN_KEY: ADMIN,
    SWITCHYARD_FILE_MAX_BYTES: String(Math.max(bytes + 1_000_000, 200_000_000)),
    SWITCHYARD_FILE_BYTES_PER_ACCOUNT: String(4 * bytes + 10_000_000),
    SWITCHYARD_BATCH_ENQUEUED_TOKENS: String(bytes),
    SWITCHYARD_REQUEST_TIMEOUT_MS: "600000",
  },
);
const base = server.target.baseURL.replace(/\/v1\/compat$/, "");
const adminKey = async (account: string) =>
  (
    (await (
      await fetch(`${base}/admin/v1/keys`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
        body: JSON.stringify({ account, name: account }),
      })
    ).json()) as { key: string }
  ).key;
const bystander: Target = { ...server.target, key: await adminKey("bystander") };

/** Each /health sample's end time, to tell which attack step a stall fell in. */
const healthAt: Array<[number, number]> = [];

async function observe(until: Promise<unknown>, minChats: number): Promise<{ healthMs: number[]; ttftMs: number[] }> {
  let done = false;
  void until.finally(() => (done = true));
  const healthMs: number[] = [];
  const ttftMs: number[] = [];
  const health = (async () => {
    while (!done) {
      const start = performance.now();
      await fetch(`${base}/health`).then((r) => r.arrayBuffer());
      healthMs.push(performance.now() - start);
      healthAt.push([performance.timeOrigin + performance.now(), performance.now() - start]);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const prompts = randomPrompts(1000, 64, 7);
  const chats = (async () => {
    for (let i = 0; !done || i < minChats; i++) {
      const result = await streamChat(bystander, prompts[i % prompts.length]!, 8, undefined);
      if (result.ttftMs !== undefined) ttftMs.push(result.ttftMs);
    }
  })();
  await until;
  await Promise.all([health, chats]);
  return { healthMs, ttftMs };
}

const phases: Record<string, { healthMs: number[]; ttftMs: number[] }> = {};
phases.quiet = await observe(new Promise((resolve) => setTimeout(resolve, 15_000)), Number(opts.chats));
const attackerKey = await adminKey("attacker");
const attackerProcess = spawn(process.execPath, [...process.execArgv, process.argv[1]!], {
  env: { ...process.env, STALL_FILES_ATTACKER: JSON.stringify({ baseURL: server.target.baseURL, key: attackerKey, model: MODEL, bytes }) },
  stdio: ["ignore", "pipe", "inherit"],
});
let attackerOutput = "";
attackerProcess.stdout!.on("data", (d: Buffer) => (attackerOutput += d));
const attack = new Promise<{ windows: Array<[string, number, number]>; fileBytes: number; lines: number }>((resolve, reject) => {
  attackerProcess.once("exit", (code) =>
    code === 0 ? resolve(JSON.parse(attackerOutput)) : reject(new Error(`the attacker exited with ${code}`)),
  );
});
phases.attack = await observe(attack, Number(opts.chats));
const { windows, fileBytes, lines } = await attack;
const steps = Object.fromEntries(windows.map(([name, from, to]) => [`${name}_ms`, Math.round(to - from)]));
const stallByStep = Object.fromEntries(
  windows.map(([name, from, to]) => [
    name,
    Math.round(Math.max(0, ...healthAt.filter(([at, ms]) => at - ms <= to && at >= from).map(([, ms]) => ms))),
  ]),
);
await server.stop();

const table = Object.entries(phases).map(([phase, { healthMs, ttftMs }]) => ({
  phase,
  health: { ...summarize(healthMs), max: Math.max(...healthMs) },
  ttft: summarize(ttftMs),
}));
const quiet = table[0]!;
const attackRow = table[1]!;
console.log(
  `\nstall-files: ${(fileBytes / 1e6).toFixed(1)} MB upload, batch create (${lines} lines), cancel, download; ${cpuDescription().model}`,
);
console.log("phase   | /health p50 | /health p99 | /health max | chat TTFT p50 | chat TTFT p99 | samples (health / chats)");
for (const row of table) {
  console.log(
    `${row.phase.padEnd(7)} | ${row.health.p50.toFixed(1).padStart(11)} | ${row.health.p99.toFixed(1).padStart(11)} | ${row.health.max.toFixed(1).padStart(11)} | ${row.ttft.p50.toFixed(1).padStart(13)} | ${row.ttft.p99.toFixed(1).padStart(13)} | ${row.health.count} / ${row.ttft.count}`,
  );
}
console.log(
  `attack steps: ${Object.entries(steps)
    .map(([k, v]) => `${k} ${Math.round(v)}`)
    .join(", ")}`,
);
console.log(`longest /health wait by step (ms): ${JSON.stringify(stallByStep)}`);
console.log(
  `ratios during/quiet: /health p99 ${(attackRow.health.p99 / quiet.health.p99).toFixed(2)}x, chat TTFT p99 ${(attackRow.ttft.p99 / quiet.ttft.p99).toFixed(2)}x (targets: /health p99 < 50 ms, TTFT p99 <= 1.5x)`,
);
mkdirSync(dirname(opts.out), { recursive: true });
writeFileSync(opts.out, JSON.stringify({ cpu: cpuDescription().model, mb: Number(opts.mb), steps, stallByStep, phases: table }, null, 2));
