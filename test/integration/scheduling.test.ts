import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  adminKey,
  postChat,
  readSseTimed,
  startServer,
  streamedContent,
  waitFor,
  SMOLLM2,
  type RunningServer,
  type TimedEvent,
  SMOLLM2_NO_END,
  FULL_CONTEXT,
} from "../helpers/server.js";
import { ask } from "../helpers/requests.js";

const LONG = "Write a very long story about a dragon who learns to sail, with many chapters.";

interface Health {
  running: number;
  waiting: number;
  preemptions: number;
  priority_saturated: boolean;
  by_tier: { running: Record<string, number>; waiting: Record<string, number> };
}

async function health(server: RunningServer): Promise<Health> {
  const body = (await (await fetch(`${server.url}/health`)).json()) as { models: Health[] };
  return body.models[0]!;
}

const until = (server: RunningServer, done: (h: Health) => boolean) =>
  waitFor(async () => ((h) => (done(h) ? h : undefined))(await health(server)), 30_000);

/**
 * A stream that holds a sequence: resolves once it is admitted (its first event); `stop()` hangs up.
 * End-of-text is banned and the budget is 6,000 tokens, so it outlasts every wait in these tests
 * on a fast machine too (2,000 tokens at temperature 0 could end within the flex wait limit).
 */
async function holdSlot(server: RunningServer, extra: Record<string, unknown> = {}) {
  const controller = new AbortController();
  const response = await fetch(`${server.baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
    body: JSON.stringify(ask(LONG, { stream: true, max_tokens: 6000, temperature: 0, logit_bias: SMOLLM2_NO_END, ...extra })),
    signal: controller.signal,
  });
  assert.equal(response.status, 200);
  let firstToken!: () => void;
  const started = new Promise<void>((resolve) => (firstToken = resolve));
  let received = 0;
  const events = readSseTimed(response, () => {
    received++;
    firstToken();
  }).catch(() => []);
  await started;
  return {
    events,
    /** Events received so far. */
    received: () => received,
    async stop() {
      controller.abort();
      await events;
      await until(server, (h) => h.running === 0);
    },
  };
}

/**
 * The flex wait limit is long enough for the waiters in these tests to be served on a slow, busy
 * machine (at 1.5 s, and at 10 s on a machine with a load of 11 on 2 cores, a flex request expired
 * while priority and standard went first), and short enough for the expiry test to wait it out.
 */
const FLEX_WAIT_MS = 20_000;

describe("one sequence, three tiers: admission order, flex expiry, preemption, bounded queue", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({
      env: { ...FULL_CONTEXT, SWITCHYARD_PARALLEL: "1", SWITCHYARD_MAX_WAITING: "3", SWITCHYARD_FLEX_MAX_WAIT_MS: String(FLEX_WAIT_MS) },
    });
  });
  after(async () => {
    await server?.stop();
  });

  test("a freed sequence goes to priority first, then standard, then flex, whatever the arrival order", async () => {
    const holder = await holdSlot(server, { service_tier: "priority" }); // nothing preempts a priority request
    const finished: string[] = [];
    const waiters = (["flex", "default", "priority"] as const).map(async (tier) => {
      const response = await postChat(server, ask("Say hi.", { max_tokens: 3, service_tier: tier }));
      assert.equal(response.status, 200);
      assert.equal((await response.json()).service_tier, tier);
      finished.push(tier);
    });
    const queued = await until(server, (h) => h.waiting === 3);
    await holder.stop();
    await Promise.all(waiters);
    assert.deepEqual(finished, ["priority", "default", "flex"]);
    // /health splits the counts under the tiers' wire names (OpenAI's "default", not "standard").
    assert.deepEqual(queued.by_tier, {
      running: { priority: 1, default: 0, flex: 0, batch: 0 },
      waiting: { priority: 1, default: 1, flex: 1, batch: 0 },
    });
    assert.equal(queued.priority_saturated, true, "a priority request waits behind priority alone: priority's own load fills the model");
    assert.equal((await health(server)).priority_saturated, false, "and no longer once it ran");
  });

  test("a flex request that finds no capacity within its wait limit gets 429 resource_unavailable and no bill", async () => {
    const flexUser = await adminKey(server, "flex-user");
    const holder = await holdSlot(server);
    const sent = performance.now();
    const response = await postChat(server, ask("Say hi.", { max_tokens: 3, service_tier: "flex" }), { key: flexUser });
    const waited = performance.now() - sent;
    await holder.stop();
    assert.equal(response.status, 429);
    const body = await response.json();
    assert.equal(body.error.code, "resource_unavailable");
    assert.equal(body.error.type, "rate_limit_error");
    assert.ok(response.headers.get("retry-after"));
    assert.ok(waited >= FLEX_WAIT_MS - 100, `it waited its limit first (${Math.round(waited)} ms)`);
    const totals = await usageTotals(server, flexUser);
    assert.equal(totals.requests, 1);
    assert.equal(totals.by_status.expired, 1, "recorded as expired");
    assert.equal(totals.completion_tokens, 0);
    assert.equal(totals.cost_usd, 0, "not billed");
  });

  /** Streams `body`; at its fifth chunk a short priority request arrives. */
  const streamWithPriorityMidway = async (body: unknown) => {
    let priorityDone: Promise<Response> | undefined;
    let chunks = 0;
    const events = await readSseTimed(await postChat(server, body), () => {
      if (++chunks === 5) priorityDone = postChat(server, ask("Say hi.", { max_tokens: 8, service_tier: "priority" }));
    });
    return { events, priority: await priorityDone! };
  };

  test("a running flex stream is preempted for a priority request and resumes with no error and no repeated token", async () => {
    const body = ask(LONG, { stream: true, max_tokens: 48, temperature: 0, service_tier: "flex" });
    const reference = streamedContent(await readSseTimed(await postChat(server, body)));
    const preemptionsBefore = (await health(server)).preemptions;

    const { events, priority } = await streamWithPriorityMidway(body);
    assert.equal(priority.status, 200);
    assert.equal((await priority.json()).service_tier, "priority");

    assert.equal((await health(server)).preemptions, preemptionsBefore + 1, "the flex stream was preempted");
    assert.equal(await metric(server, "vllm:num_preemptions_total", { tier: "flex" }), 1);
    const payloads = events.map((e) => e.data);
    assert.equal(payloads.at(-1), "[DONE]");
    assert.ok(
      payloads.every((p) => p === "[DONE]" || !("error" in JSON.parse(p))),
      "no error reached the client",
    );
    const finish = JSON.parse(payloads.at(-2)!).choices[0];
    assert.equal(finish.finish_reason, "length");
    assert.equal(streamedContent(events), reference, "the same text as without preemption: nothing lost, nothing repeated");
  });

  test("a running standard stream is preempted at once for a priority request and resumes from its saved cells with the same text", async () => {
    const body = ask(LONG, { stream: true, max_tokens: 48, temperature: 0 });
    const reference = streamedContent(await readSseTimed(await postChat(server, body)));
    const preemptionsBefore = (await health(server)).preemptions;
    const restoredBefore = (
      (await (await fetch(`${server.url}/health`)).json()) as { models: Array<{ engine: { restored_cells: number } }> }
    ).models[0]!.engine.restored_cells;

    const { events, priority } = await streamWithPriorityMidway(body);
    assert.equal(priority.status, 200);
    assert.equal(
      (await health(server)).preemptions,
      preemptionsBefore + 1,
      "the standard stream gave way rather than make priority wait for it",
    );
    const payloads = events.map((e) => e.data);
    assert.ok(
      payloads.every((p) => p === "[DONE]" || !("error" in JSON.parse(p))),
      "no error reached the client",
    );
    assert.equal(JSON.parse(payloads.at(-2)!).choices[0].finish_reason, "length");
    assert.equal(streamedContent(events), reference, "the same text as without preemption: nothing lost, nothing repeated");
    const engine = (
      (await (await fetch(`${server.url}/health`)).json()) as {
        models: Array<{
          engine: {
            restored_cells: number;
            setup_seconds: number;
            step_round_trip_seconds: number;
            shards: Array<Record<string, unknown>>;
          };
        }>;
      }
    ).models[0]!.engine;
    assert.ok(engine.restored_cells > restoredBefore, "it resumed from its saved cells, not by computing them again");
    assert.ok(
      engine.setup_seconds >= 0 && engine.setup_seconds <= engine.step_round_trip_seconds,
      "the runner's setup (saves, restores, sampler chains) is counted, within the steps' round trips",
    );
    const shards = engine.shards;
    assert.ok(
      shards.length >= 1 && shards.every((s) => "step_budget_ms" in s && typeof s.step_budget_tokens === "number"),
      "/health shows each shard's step budget",
    );
  });

  test("beyond the bounded wait queue: 429 queue_full with Retry-After", async () => {
    const holder = await holdSlot(server);
    const controller = new AbortController();
    const waiting = [1, 2, 3].map(() =>
      fetch(`${server.baseURL}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
        body: JSON.stringify(ask("Say hi.", { max_tokens: 3 })),
        signal: controller.signal,
      }).catch(() => undefined),
    );
    await until(server, (h) => h.waiting === 3);
    const refused = await postChat(server, ask("Say hi.", { max_tokens: 3, service_tier: "priority" }));
    assert.equal(refused.status, 429);
    assert.equal((await refused.json()).error.code, "queue_full");
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    controller.abort();
    await Promise.all(waiting);
    await holder.stop();
  });
});

describe("prefix cache and chunked prefill", () => {
  let server: RunningServer;
  let otherAccountKey: string;
  before(async () => {
    server = await startServer({ env: { ...FULL_CONTEXT, SWITCHYARD_PARALLEL: "3" } });
    otherAccountKey = await adminKey(server, "someone-else");
  });
  after(async () => {
    await server?.stop();
  });

  test("a conversation's next turn reuses its cached prefix, reports cached_tokens and is billed at the cached price; another account reuses nothing", async () => {
    const system = { role: "system", content: "You are a terse assistant. Answer in one short sentence. ".repeat(8) };
    const turn1 = [system, { role: "user", content: "What is the capital of France?" }];
    const first = await (await postChat(server, { model: SMOLLM2, messages: turn1, max_tokens: 16, temperature: 0 })).json();
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);

    const turn2 = [...turn1, { role: "assistant", content: first.choices[0].message.content }, { role: "user", content: "And of Italy?" }];
    const second = await (await postChat(server, { model: SMOLLM2, messages: turn2, max_tokens: 16, temperature: 0 })).json();
    const cached = second.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cached >= first.usage.prompt_tokens - 1, `turn 2 reused turn 1's prompt (${cached} of ${second.usage.prompt_tokens})`);
    assert.ok(cached < second.usage.prompt_tokens);
    const { prompt_tokens, completion_tokens } = second.usage;
    // $ per 1M: input 0.02, cached input 0.01, output 0.06.
    assert.equal(second.usage.estimated_cost, ((prompt_tokens - cached) * 2 + cached * 1 + completion_tokens * 6) / 1e8);

    const stranger = await (
      await postChat(server, { model: SMOLLM2, messages: turn2, max_tokens: 16, temperature: 0 }, { key: otherAccountKey })
    ).json();
    assert.equal(stranger.usage.prompt_tokens, second.usage.prompt_tokens);
    assert.equal(stranger.usage.prompt_tokens_details.cached_tokens, 0, "another account's cached prompt is never reused");

    const again = await (await postChat(server, { model: SMOLLM2, messages: turn2, max_tokens: 16, temperature: 0 })).json();
    assert.equal(
      again.usage.prompt_tokens_details.cached_tokens,
      again.usage.prompt_tokens - 1,
      "the same prompt again: all but the last token reused",
    );
    assert.equal(again.choices[0].message.content, second.choices[0].message.content, "reused cells give the same greedy answer");

    const hits = await metric(server, "vllm:prefix_cache_hits_total", { tier: "default" });
    const queries = await metric(server, "vllm:prefix_cache_queries_total", { tier: "default" });
    assert.equal(hits, cached + again.usage.prompt_tokens_details.cached_tokens, "/metrics counts the reused tokens");
    assert.ok(queries! >= first.usage.prompt_tokens + second.usage.prompt_tokens * 3);
    const finished = async (reason: string) =>
      (await metric(server, "vllm:request_success_total", { tier: "default", finished_reason: reason })) ?? 0;
    assert.equal((await finished("stop")) + (await finished("length")), 4, "four requests finished");
    assert.equal(await metric(server, "vllm:time_to_first_token_seconds_count", { tier: "default" }), 4);
    assert.ok((await metric(server, "vllm:kv_cache_usage_perc"))! > 0, "idle cached prefixes hold cells");
    assert.equal(await metric(server, "vllm:num_requests_running", { tier: "default" }), 0);
    assert.equal(await metric(server, "vllm:num_requests_waiting", { tier: "priority" }), 0);
    assert.equal(await metric(server, "switchyard:priority_saturated"), 0);

    const totals = await usageTotals(server);
    assert.equal(totals.cached_tokens, cached + again.usage.prompt_tokens_details.cached_tokens, "the ledger records the cached tokens");
  });

  test("a new conversation after the same system prompt reuses it, and the cached conversation stays whole for its next turn", async () => {
    const key = await adminKey(server, "system-prompt-sharer");
    // Longer than a copy is worth at SmolLM2's 8,192 cells a sequence (32 tokens: copyMinTokens).
    const system = { role: "system", content: "You answer questions about geography in one short sentence, never more. ".repeat(3) };
    const ask = async (messages: unknown[]) =>
      (await (await postChat(server, { model: SMOLLM2, messages, max_tokens: 8, temperature: 0 }, { key })).json()).usage;
    const conversation = [system, { role: "user", content: `Tell me about rivers: ${"the river runs past the mill. ".repeat(12)}` }];
    const first = await ask(conversation);
    assert.equal(first.prompt_tokens_details.cached_tokens, 0);
    // Another user question after the same system prompt: the shared start is copied, not computed again.
    const other = await ask([system, { role: "user", content: "What is the capital of Peru?" }]);
    const shared = other.prompt_tokens_details.cached_tokens;
    assert.ok(
      shared >= 32 && shared < other.prompt_tokens - 5,
      `the system prompt's tokens were reused (${shared} of ${other.prompt_tokens})`,
    );
    // The first conversation is still cached whole.
    const again = await ask(conversation);
    assert.equal(again.prompt_tokens_details.cached_tokens, again.prompt_tokens - 1);
  });

  test("a long prompt loads in chunks between the decode steps of a running stream, which keeps flowing", async () => {
    const running: TimedEvent[] = [];
    const controller = new AbortController();
    const streaming = fetch(`${server.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
      body: JSON.stringify(ask(LONG, { stream: true, max_tokens: 1500, temperature: 0 })),
      signal: controller.signal,
    }).then((response) => readSseTimed(response, (e) => running.push(e)).catch(() => []));
    await waitFor(async () => (running.length >= 3 ? true : undefined), 30_000);

    const longPrompt = "The quick brown fox jumps over the lazy dog near the quiet river bank. ".repeat(100);
    const sent = performance.now();
    const { usage } = await (await postChat(server, ask(longPrompt, { max_tokens: 1 }))).json();
    const loaded = performance.now();
    controller.abort();
    await streaming;

    assert.ok(usage.prompt_tokens > 1000, `a prompt of ${usage.prompt_tokens} tokens needs many 128-token steps`);
    const during = running.filter((e) => e.at > sent && e.at < loaded).length;
    assert.ok(during >= 4, `the running stream got ${during} chunks while the ${usage.prompt_tokens}-token prompt loaded`);
  });
});

describe("streams running on every other sequence", () => {
  const SEQUENCES = 6;
  let server: RunningServer;
  let otherAccountKey: string;
  before(async () => {
    server = await startServer({ env: { ...FULL_CONTEXT, SWITCHYARD_PARALLEL: String(SEQUENCES) } });
    otherAccountKey = await adminKey(server, "someone-else");
  });
  after(async () => {
    await server?.stop();
  });

  test("a request that needs a cached sequence's cells cleared starts while the streams run, not after them", async () => {
    // Short requests on every sequence first: each then holds cached cells, so the last request, of
    // another account, must clear one, which needs the context between two decode steps.
    const questions = Array.from({ length: SEQUENCES }, (_, i) => `Name ${i + 2} colours.`);
    await Promise.all(questions.map(async (q) => assert.equal((await postChat(server, ask(q, { max_tokens: 4 }))).status, 200)));
    const holders = await Promise.all(Array.from({ length: SEQUENCES - 1 }, () => holdSlot(server)));
    let holdersEnded = false;
    void Promise.all(holders.map((h) => h.events)).then(() => (holdersEnded = true));

    const receivedBefore = holders.map((h) => h.received());
    const response = await postChat(server, ask("Say hi.", { max_tokens: 3 }), { key: otherAccountKey });
    const answered = await response.json();
    const during = holders.map((h, i) => h.received() - receivedBefore[i]!);
    const streamsStillRunning = !holdersEnded && (await health(server)).running === SEQUENCES - 1;
    await Promise.all(holders.map((h) => h.stop()));

    assert.equal(response.status, 200);
    assert.equal(answered.usage.completion_tokens, 3);
    assert.ok(streamsStillRunning, `the request was answered while the ${SEQUENCES - 1} 2000-token streams were still running`);
    // Clearing the cells, the prompt and three tokens take a handful of steps; each stream gets one token a step.
    // The streams on the request's shard give it its steps; the other shard's streams run on (they
    // may get many more tokens meanwhile: its steps hold no prompt), so the least is what counts.
    assert.ok(Math.min(...during) <= 20, `the streams got ${JSON.stringify(during)} chunks while the request waited and ran`);
  });
});

interface UsageTotals {
  requests: number;
  by_status: Record<string, number>;
  cached_tokens: number;
  completion_tokens: number;
  cost_usd: number;
}

/** One sample of the server's /metrics, by name and labels (model_name is SmolLM2's unless given). */
async function metric(server: RunningServer, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const wanted = { model_name: SMOLLM2, ...labels };
  for (const line of text.split("\n")) {
    const match = /^([^\s{]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(wanted).every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return undefined;
}

async function usageTotals(server: RunningServer, key = server.key): Promise<UsageTotals> {
  const response = await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
  return (await response.json()).totals;
}
