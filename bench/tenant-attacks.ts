/**
 * Replays the hostile tenant's requests of issue 20 against a real server (the real model), and
 * counts what came back: requests sent, answers by status, 5xx, hangs (no answer within the
 * client's timeout), and for each attack whether the service held. The regression tests assert each
 * attack one by one; this is the whole attack again in one run, for the closing note.
 *
 *   node --import tsx bench/tenant-attacks.ts [--rounds 3] [--timeout-s 120]
 *
 * Prints a table and writes bench/results/tenant-attacks-<time>.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Command } from "commander";
import { startSwitchyard } from "./peers/targets.js";

const opts = new Command()
  .option("--rounds <n>", "times each attack is sent", "3")
  .option("--timeout-s <s>", "a client's wait before it calls the request hung", "120")
  .parse()
  .opts<{ rounds: string; timeoutS: string }>();
const MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct";
const ADMIN = `sy-admin-attack-replay-${"x".repeat(24)}`;
const server = await startSwitchyard(
  { modelId: MODEL, modelPath: "", threads: 2, parallel: 8, contextPerSequence: 2048, port: 18470 },
  "switchyard",
  { SWITCHYARD_ADMIN_KEY: ADMIN },
);
const base = server.target.baseURL.replace(/\/v1\/compat$/, "");

interface Sent {
  attack: string;
  status: number | "hung";
  held: boolean;
}
const sent: Sent[] = [];

/** One raw request; `held` judges the answer (status and parsed body). */
async function send(
  attack: string,
  method: string,
  path: string,
  key: string | null,
  body: string | undefined,
  held: (status: number, body: any) => boolean,
): Promise<void> {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  try {
    const response = await fetch(base + path, { method, headers, body, signal: AbortSignal.timeout(Number(opts.timeoutS) * 1000) });
    const text = await response.text();
    let parsed: any = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    sent.push({ attack, status: response.status, held: held(response.status, parsed) });
  } catch {
    sent.push({ attack, status: "hung", held: false });
  }
}

const adminCall = async (path: string, body: unknown) =>
  (await (
    await fetch(base + path, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    })
  ).json()) as any;
const owner = await adminCall("/admin/v1/keys", { account: "victim", name: "owner", manage_keys: true, manage_deployments: true });
const leaked = await adminCall("/admin/v1/keys", {
  account: "victim",
  name: "leaked",
  manage_keys: true,
  budget_usd: "0.001",
  rpm_limit: 5,
  expires_at: Math.floor(Date.now() / 1000) + 86_400,
});
const plain = await adminCall("/admin/v1/keys", { account: "attacker", name: "plain" });
const other = await adminCall("/admin/v1/keys", { account: "bystander", name: "chat" });
const isError = (b: any) => b && typeof b === "object" && b.error && ["message", "type", "param", "code"].every((k) => k in b.error);
const chat = (content: string) => JSON.stringify({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 2 });

const attacks: Array<[string, () => Promise<unknown>]> = [
  [
    "1 empty prompt x8 + another account's chat",
    () =>
      Promise.all([
        ...[`""`, `[""]`, `["x", ""]`, `"", "echo": true`, `"", "n": 8`, `"", "service_tier": "flex"`, `"", "stream": true`, `""`].map(
          (prompt) =>
            send(
              "1 empty prompt",
              "POST",
              "/v1/completions",
              plain.key,
              `{"model":"${MODEL}","prompt":${prompt},"max_tokens":1}`,
              (s) => s === 200,
            ),
        ),
        send("1 bystander chat", "POST", "/v1/compat/chat/completions", other.key, chat("Hi"), (s) => s === 200),
      ]),
  ],
  [
    "2 deploy without the right",
    () =>
      send(
        "2 deploy without the right",
        "POST",
        "/v1/deployments",
        plain.key,
        JSON.stringify({ model: MODEL, name: "x", max_batch_size: 32, max_instances: 4 }),
        (s, b) => s === 403 && isError(b),
      ),
  ],
  [
    "3 mint a bigger key",
    () =>
      send(
        "3 mint a bigger key",
        "POST",
        "/v1/keys",
        leaked.key,
        JSON.stringify({ manage_keys: true, budget_usd: "1000000", rpm_limit: 100000, expires_at: "2099-01-01T00:00:00Z" }),
        (s, b) => s === 403 && isError(b),
      ),
  ],
  ["3 revoke the owner's key", () => send("3 revoke the owner", "DELETE", `/v1/keys/${owner.id}`, leaked.key, undefined, (s) => s === 403)],
  [
    "4 empty JSON body on body-less routes",
    () =>
      Promise.all(
        ["/v1/responses/resp_unknown", "/v1/keys/key_unknown", "/v1/deployments/dep_unknown"].map((path) =>
          send("4 empty body", "DELETE", path, owner.key, "", (s, b) => s === 404 && isError(b)),
        ),
      ),
  ],
  [
    "5 NUL ids and a lone surrogate",
    () =>
      Promise.all([
        send("5 NUL id", "GET", "/v1/deployments/%00", owner.key, undefined, (s, b) => s === 404 && isError(b)),
        send("5 NUL id", "DELETE", "/v1/responses/%00", owner.key, undefined, (s, b) => s === 404 && isError(b)),
        send(
          "5 NUL previous_response_id",
          "POST",
          "/v1/responses",
          owner.key,
          `{"model":"${MODEL}","input":"hi","previous_response_id":"resp_\\u0000"}`,
          (s, b) => s >= 400 && s < 500 && isError(b),
        ),
        send(
          "5 lone surrogate",
          "POST",
          "/v1/responses",
          owner.key,
          `{"model":"${MODEL}","input":"a\\ud800b"}`,
          (s, b) => s === 400 && isError(b),
        ),
      ]),
  ],
  [
    "11 bad URLs",
    () =>
      Promise.all([
        send(
          "11 bad percent-encoding",
          "GET",
          "/v1/models/%ff%fe",
          owner.key,
          undefined,
          (s, b) => s === 400 && isError(b) && !JSON.stringify(b).includes("%ff"),
        ),
        send(
          "11 long path parameter",
          "GET",
          `/v1/deployments/${"a".repeat(150)}`,
          owner.key,
          undefined,
          (s, b) => s === 414 && isError(b) && !JSON.stringify(b).includes("a".repeat(150)),
        ),
      ]),
  ],
  [
    "12 admin key guessing",
    () =>
      Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          send("12 admin guess", "GET", "/admin/v1/keys", `wrong-${i}`, undefined, (s) => s === 401 || s === 429),
        ),
      ),
  ],
  [
    "16 six 600 KB prompts + another account's chat",
    () =>
      Promise.all([
        ...Array.from({ length: 6 }, (_, i) =>
          send(
            "16 huge prompt",
            "POST",
            "/v1/compat/chat/completions",
            plain.key,
            chat(`${i} ${"lorem ipsum dolor sit amet ".repeat(23_000)}`),
            (s) => s === 400,
          ),
        ),
        send("16 bystander chat", "POST", "/v1/compat/chat/completions", other.key, chat("Hello"), (s) => s === 200),
      ]),
  ],
];

try {
  for (let round = 0; round < Number(opts.rounds); round++) {
    for (const [name, run] of attacks) {
      process.stderr.write(`round ${round + 1}: ${name}\n`);
      await run();
    }
  }
  const health = (await (await fetch(`${base}/health`)).json()) as any;
  const rows = [...new Set(sent.map((s) => s.attack))].map((attack) => {
    const of = sent.filter((s) => s.attack === attack);
    const statuses = [...new Set(of.map((s) => s.status))].join(" ");
    return {
      attack,
      requests: of.length,
      statuses,
      "5xx": of.filter((s) => typeof s.status === "number" && s.status >= 500).length,
      hung: of.filter((s) => s.status === "hung").length,
      held: of.filter((s) => s.held).length,
    };
  });
  console.table(rows);
  const total = {
    requests: sent.length,
    "5xx": rows.reduce((a, r) => a + r["5xx"], 0),
    hung: rows.reduce((a, r) => a + r.hung, 0),
    held: rows.reduce((a, r) => a + r.held, 0),
  };
  const running = Object.values(health.models ?? {}).reduce((a: number, m: any) => a + (m.running ?? 0), 0);
  console.log(
    `total: ${total.requests} requests, ${total["5xx"]} 5xx, ${total.hung} hung, ${total.held} held; after the run /health shows ${running} running`,
  );
  mkdirSync("bench/results", { recursive: true });
  const out = `bench/results/tenant-attacks-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
  writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), rows, total, runningAfter: running }, null, 2));
  console.log(`wrote ${out}`);
} finally {
  await server.stop();
}
