import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import {
  adminKey,
  readSseTimed,
  startServer,
  waitFor,
  SMOLLM2,
  type RunningServer,
  type TimedEvent,
  SMOLLM2_NO_END,
} from "../helpers/server.js";
import { ask } from "../helpers/requests.js";
import { smolStandardUnits } from "../helpers/usage.js";
import { startWorker, workerServed, WORKER_KEY, type RunningWorker } from "../helpers/worker.js";

/** SmolLM2's end-of-generation tokens, and im_start: banned, a generation runs to max_tokens. */
const NO_END = { ...SMOLLM2_NO_END, "1": -100 };
const SYSTEM = `You are a patient librarian. ${"Answer briefly, cite the shelf, and never invent a book that the catalogue does not hold. ".repeat(14)}`;

interface GatewayHealth {
  running: number;
  waiting: number;
  replicas: Array<{ index: number; health: "up" | "down"; running: number; served: number }>;
}

describe("a gateway in front of two Switchyard workers", () => {
  let workers: RunningWorker[] = [];
  let gateway: RunningServer;

  before(async () => {
    const engine = { SWITCHYARD_PARALLEL: "2", SWITCHYARD_THREADS: "1" };
    workers = await Promise.all([startWorker(engine), startWorker(engine)]);
    const dir = mkdtempSync(join(tmpdir(), "switchyard-gateway-"));
    const catalog = join(dir, "catalog.json");
    writeFileSync(catalog, JSON.stringify({ models: [gatewayEntry(workers.map((w) => w.baseURL))] }));
    gateway = await startServer({
      env: { SWITCHYARD_CATALOG: catalog, SWITCHYARD_WORKER_KEY: WORKER_KEY, SWITCHYARD_FLEX_MAX_WAIT_MS: "1500" },
    });
  });
  after(async () => {
    await gateway?.stop();
    await Promise.all(workers.map((w) => w.stop()));
  });

  const client = (key = gateway.key) => new OpenAI({ apiKey: key, baseURL: gateway.baseURL, timeout: 120_000, maxRetries: 0 });
  const health = async (): Promise<GatewayHealth> =>
    ((await (await fetch(`${gateway.url}/health`)).json()) as { models: GatewayHealth[] }).models[0]!;
  const until = (done: (h: GatewayHealth) => boolean) => waitFor(async () => ((h) => (done(h) ? h : undefined))(await health()), 60_000);
  const usage = async (key: string) =>
    (await (await fetch(`${gateway.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } })).json()).totals;
  const served = () => Promise.all(workers.map(workerServed));

  /** A stream through the gateway; `first` resolves when its first event arrives (it was admitted). */
  function stream(body: Record<string, unknown>, key = gateway.key) {
    const controller = new AbortController();
    const response = fetch(`${gateway.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ ...body, stream: true }),
      signal: controller.signal,
    });
    let firstAt!: (at: number) => void;
    const first = new Promise<number>((resolve) => (firstAt = resolve));
    const events = response.then((r) => readSseTimed(r, (e: TimedEvent) => firstAt(e.at))).catch(() => [] as TimedEvent[]);
    return { response, first, events, stop: () => controller.abort() };
  }

  test("usage and cost come from the worker's own usage, exactly", async () => {
    const reply = await client().chat.completions.create(ask("Name three colours.", { max_tokens: 8 }) as never);
    const direct = await (
      await fetch(`${workers[0]!.baseURL}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${WORKER_KEY}`, "content-type": "application/json" },
        body: JSON.stringify(ask("Name three colours.", { max_tokens: 8 })),
      })
    ).json();
    assert.equal(
      reply.usage!.prompt_tokens,
      direct.usage.prompt_tokens,
      "the prompt is billed as the engine tokenized it, not as estimated",
    );
    assert.equal((reply.usage as unknown as { estimated_cost: number }).estimated_cost, smolStandardUnits(reply.usage as never) / 1e8);
    const totals = await usage(gateway.key);
    assert.equal(totals.prompt_tokens, reply.usage!.prompt_tokens);
    assert.equal(totals.completion_tokens, reply.usage!.completion_tokens);
    assert.equal(totals.cost_usd, smolStandardUnits(reply.usage as never) / 1e8);
  });

  test("a prediction goes up to the worker, and the counts it reports come back in the gateway's usage, billed once", async () => {
    const body = ask("Repeat exactly: the cat sat on the mat by the door.", { max_tokens: 16, temperature: 0 });
    const plain = await client().chat.completions.create(body as never);
    const answer = plain.choices[0]!.message.content!;
    const reply = await client().chat.completions.create({ ...body, prediction: { type: "content", content: answer } } as never);
    assert.equal(reply.choices[0]!.message.content, answer);
    const details = reply.usage!.completion_tokens_details as { accepted_prediction_tokens: number; rejected_prediction_tokens: number };
    assert.ok(Number.isInteger(details.accepted_prediction_tokens) && Number.isInteger(details.rejected_prediction_tokens));
    // The worker's completion_tokens holds its rejected prediction tokens; the gateway counts them once.
    assert.equal(reply.usage!.completion_tokens, plain.usage!.completion_tokens + details.rejected_prediction_tokens);
    assert.equal((reply.usage as unknown as { estimated_cost: number }).estimated_cost, smolStandardUnits(reply.usage as never) / 1e8);
    const malformed = await client()
      .chat.completions.create({ ...body, prediction: { type: "content", content: [{ type: "image" }] } } as never)
      .catch((e: unknown) => e);
    assert.ok(malformed instanceof OpenAI.BadRequestError);
    assert.equal(malformed.param, "prediction.content[0].type");
  });

  test("concurrent requests spread over both workers", async () => {
    const before = await served();
    const runs = [
      stream(ask("Tell me about owls.", { max_tokens: 24, logit_bias: NO_END })),
      stream(ask("Tell me about rivers.", { max_tokens: 24, logit_bias: NO_END })),
    ];
    await Promise.all(runs.map((r) => r.events));
    const afterwards = await served();
    assert.deepEqual(
      afterwards.map((n, i) => n - before[i]!),
      [1, 1],
    );
  });

  test("prefix affinity: one account's requests with the same long start go to one worker and hit its cache; another account's do not share it", async () => {
    const before = await served();
    const cached: number[] = [];
    for (const question of ["Where are the atlases?", "Do you hold Moby-Dick?", "Which shelf has poetry?", "Is there a dictionary?"]) {
      const reply = await client().chat.completions.create({
        model: SMOLLM2,
        max_tokens: 4,
        messages: [
          { role: "system", content: SYSTEM },
          { role: "user", content: question },
        ],
      });
      cached.push(reply.usage!.prompt_tokens_details!.cached_tokens!);
    }
    const delta = (await served()).map((n, i) => n - before[i]!).sort();
    assert.deepEqual(delta, [0, 4], "all four on the same worker");
    assert.ok(
      cached.slice(1).every((c) => c > 200),
      `later requests reuse the cached system prompt: ${cached}`,
    );
    const other = await adminKey(gateway, "someone-else");
    const theirs = await client(other).chat.completions.create({
      model: SMOLLM2,
      max_tokens: 4,
      messages: [
        { role: "system", content: SYSTEM },
        { role: "user", content: "Where are the atlases?" },
      ],
    });
    assert.equal(theirs.usage!.prompt_tokens_details!.cached_tokens, 0, "no cached prompt crosses accounts through the gateway");
  });

  test("tiers at the gateway: a queued priority request passes earlier queued standard ones", async () => {
    const short = stream(ask("Count slowly.", { max_tokens: 40, logit_bias: NO_END }));
    const long = stream(ask("Count very slowly.", { max_tokens: 400, logit_bias: NO_END }));
    await until((h) => h.running === 2);
    const s1 = stream(ask("Say one.", { max_tokens: 3 }));
    await until((h) => h.waiting === 1);
    const s2 = stream(ask("Say two.", { max_tokens: 3 }));
    await until((h) => h.waiting === 2);
    const p = stream(ask("Say three.", { max_tokens: 3, service_tier: "priority" }));
    await until((h) => h.waiting === 3);
    const [pAt, s1At, s2At] = await Promise.all([p.first, s1.first, s2.first]);
    assert.ok(pAt < s1At && s1At < s2At, `admitted priority, then standard in arrival order (p ${pAt}, s1 ${s1At}, s2 ${s2At})`);
    long.stop();
    await Promise.all([short.events, long.events, p.events, s1.events, s2.events]);
  });

  test("flex waits at the gateway, then fails with 429 and no charge", async () => {
    const key = await adminKey(gateway, "flex-user");
    const blockers = [
      stream(ask("Count very slowly.", { max_tokens: 400, logit_bias: NO_END })),
      stream(ask("Count very slowly too.", { max_tokens: 400, logit_bias: NO_END })),
    ];
    await until((h) => h.running === 2);
    const error = await client(key)
      .chat.completions.create(ask("Say hi.", { max_tokens: 3, service_tier: "flex" }) as never)
      .then(
        () => null,
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
    assert.equal(error?.status, 429);
    assert.equal((error?.error as { code?: string } | undefined)?.code, "resource_unavailable");
    blockers.forEach((b) => b.stop());
    await Promise.all(blockers.map((b) => b.events));
    const totals = await usage(key);
    assert.equal(totals.by_status.expired, 1);
    assert.equal(totals.cost_usd, 0);
  });

  test("a worker killed mid-stream: a clean error event, the delivered tokens billed, the next request on the other worker", async () => {
    const key = await adminKey(gateway, "victim");
    await until((h) => h.running === 0);
    const run = await client(key).chat.completions.create({
      ...ask("Tell me a very long story.", { max_tokens: 400, logit_bias: NO_END }),
      stream: true,
    } as never);
    let chunks = 0;
    let killed: RunningWorker | undefined;
    const failure = await (async () => {
      for await (const chunk of run as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>) {
        if (chunk.choices[0]?.delta.content) chunks++;
        if (chunks === 5 && !killed) {
          const busy = await Promise.all(
            workers.map(async (w) => (await (await fetch(`${w.url}/health`)).json()).models[0].running as number),
          );
          killed = workers[busy.findIndex((n) => n > 0)]!;
          killed.process.kill("SIGKILL");
        }
      }
      return null;
    })().catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    assert.ok(failure instanceof OpenAI.APIError, `the stream ends with an error event (${String(failure)})`);
    assert.equal((failure.error as { type?: string }).type, "server_error");
    const totals = await waitFor(async () => ((t) => (t.by_status.failed === 1 ? t : undefined))(await usage(key)), 30_000);
    assert.equal(totals.completion_tokens, chunks, "billed exactly the tokens the client received");
    assert.equal(totals.cost_usd, smolStandardUnits({ prompt_tokens: totals.prompt_tokens, completion_tokens: chunks }) / 1e8);

    const survivor = workers.find((w) => w !== killed)!;
    const before = await workerServed(survivor);
    const reply = await client(key).chat.completions.create(ask("Say hello.", { max_tokens: 4 }) as never);
    assert.ok(reply.choices[0]!.message.content !== undefined);
    assert.equal(await workerServed(survivor), before + 1);
    const replicas = (await health()).replicas;
    assert.equal(replicas[workers.indexOf(killed!)]!.health, "down", "the breaker keeps the dead worker out");
  });
});

function gatewayEntry(replicas: string[]) {
  return {
    id: SMOLLM2,
    backend: { type: "openai", replicas, api_key_env: "SWITCHYARD_WORKER_KEY", max_concurrency: 1 },
    context_length: 8192,
    precision: "q4_1",
    tags: ["JSON", "Function"],
    pricing: { input: "0.02", output: "0.06", cached_input: "0.01", discount_percent: "0", tiers: { priority: "1.5", flex: "0.8" } },
    created: 1738886400,
  };
}
