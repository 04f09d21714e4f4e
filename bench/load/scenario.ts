import { conversationSystemPrompt, FOLLOW_UPS, randomPrompts, type ChatMessage } from "./datasets.js";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { streamChat, type RequestResult, type SamplingName, type Target } from "./client-stream.js";
import { poissonGapMs, seededRandom, summarize, type Summary } from "./stats.js";
import { startBackgroundBatch, type BackgroundBatch } from "./background-batch.js";

export interface RandomScenario {
  kind: "random";
  name: string;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  maxConcurrency: number;
  /** Requests per second (Poisson arrivals); Infinity sends as fast as the concurrency allows. */
  requestRate: number;
  /** service_tier → share of requests, e.g. { priority: 0.2, default: 0.5, flex: 0.3 }. */
  tierMix?: Record<string, number>;
  /**
   * model → share of requests, e.g. a base and its LoRA adapter half and half; default: the
   * target's model. Each model gets exactly its share of the requests (rounded), in a seeded random order.
   */
  modelMix?: Record<string, number>;
  /** Fields every request carries besides the sampling settings (e.g. a logit_bias that bans the end tokens). */
  fields?: Record<string, unknown>;
  sampling?: SamplingName;
  /** A busy loop runs on one core for the whole scenario: the machine is not the server's alone. */
  disturbed?: boolean;
  /** A batch (Batch API) runs underneath for the whole scenario; it is cancelled at the end. */
  backgroundBatch?: BackgroundBatch;
  /**
   * Every prompt is sent once before the measured pass (same concurrency, not counted), so each
   * request of the measured pass finds its whole prompt cached: the shape of clients that resend a
   * conversation, a regenerate, a retry.
   */
  cachedPrompts?: boolean;
}

export interface MultiturnScenario {
  kind: "multiturn";
  name: string;
  conversations: number;
  turns: number;
  outputTokens: number;
  maxConcurrency: number;
}

/**
 * Closed-loop clients in groups, one group per tier (e.g. { priority: 2, default: 20, flex: 10 }):
 * each client sends its next request as soon as its last one ends, until `durationS` has passed;
 * requests in flight then finish and count.
 */
export interface ClientsScenario {
  kind: "clients";
  name: string;
  clients: Record<string, number>;
  durationS: number;
  inputTokens: number;
  outputTokens: number;
}

export type Scenario = RandomScenario | MultiturnScenario | ClientsScenario;

export interface ScenarioReport {
  scenario: string;
  target: string;
  durationS: number;
  completed: number;
  failed: Record<string, { count: number; meanTimeToFailureS: number }>;
  requestThroughput: number;
  outputTokensPerS: number;
  meanOutputTokens: number;
  ttftMs: Summary;
  tpotMs: Summary;
  itlMs: Summary;
  e2eMs: Summary;
  /** Cached prompt tokens over prompt tokens; null when the server reports none. */
  prefixCacheHitRate: number | null;
  byTier: Record<string, { ttftMs: Summary; itlMs: Summary; completed: number; failed: number }>;
  /** modelMix: each model's requests (their output tokens over the scenario's whole duration). */
  byModel?: Record<string, { completed: number; failed: number; outputTokensPerS: number; tpotMs: Summary; itlMs: Summary }>;
  /** The server's largest resident set during the scenario (MB); null when its process is unknown. */
  peakRssMb: number | null;
  /**
   * Where our engine's time went during the scenario (from /health's step counters, summed over
   * shards): steps, decode and sampling seconds, and mean tokens per step. Null for other servers.
   */
  engine: {
    shards: number;
    steps: number;
    setupS: number;
    decodeS: number;
    sampleS: number;
    roundTripS: number;
    hostS: number;
    tokensPerStep: number;
    promptTokensComputed: number;
    /** Steps that ran one adapter's requests while another's on the shard waited (0 where no request named an adapter). */
    adapterTurnSteps: number;
  } | null;
  /** backgroundBatch: the lines the batch answered while the scenario ran. */
  batchLinesDone?: number;
  /** multiturn: TTFT of first turns and of later ones. */
  ttftFirstTurnMs?: Summary;
  ttftLaterTurnsMs?: Summary;
}

interface Timed extends RequestResult {
  turn?: number;
  /** modelMix: the model the request named. */
  model?: string;
}

/** Each scenario gets prompts of its own (seeded by its name), so no run finds another's prompts cached. */
export async function runScenario(
  target: Target,
  scenario: Scenario,
  seed = [...scenario.name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7),
): Promise<ScenarioReport> {
  if (scenario.kind === "random" && scenario.cachedPrompts) await runRandom(target, scenario, seed);
  const started = performance.now();
  const busy =
    scenario.kind === "random" && scenario.disturbed ? spawn(process.execPath, ["-e", "for(;;){}"], { stdio: "ignore" }) : undefined;
  const rss = rssSampler(target.pid);
  const before = await engineCounters(target);
  const batch =
    scenario.kind === "random" && scenario.backgroundBatch ? await startBackgroundBatch(target, scenario.backgroundBatch, seed) : undefined;
  try {
    const results =
      scenario.kind === "random"
        ? await runRandom(target, scenario, seed)
        : scenario.kind === "clients"
          ? await runClients(target, scenario, seed)
          : await runMultiturn(target, scenario);
    const after = await engineCounters(target);
    const batchLinesDone = batch ? (await batch.stop()).completed : undefined;
    return {
      ...report(target, scenario, results, (performance.now() - started) / 1000),
      peakRssMb: rss.peak(),
      engine: engineDelta(before, after),
      ...(batch ? { batchLinesDone } : {}),
    };
  } finally {
    rss.stop();
    busy?.kill("SIGKILL");
  }
}

interface Counters {
  steps: number;
  batch_tokens: number;
  prompt_tokens_computed: number;
  setup_seconds?: number;
  decode_seconds: number;
  sample_seconds: number;
  step_round_trip_seconds: number;
  host_seconds: number;
  adapter_turn_steps?: number;
  shards?: unknown[];
}

/** Our server's step counters for the target's model, or null for a server that has none. */
async function engineCounters(target: Target): Promise<Counters | null> {
  const health = await fetch(new URL("/health", target.baseURL))
    .then((r) => r.json() as Promise<{ models?: Array<{ id: string; engine?: Counters }> }>)
    .catch(() => null);
  return health?.models?.find((m) => m.id === target.model)?.engine ?? null;
}

function engineDelta(before: Counters | null, after: Counters | null): ScenarioReport["engine"] {
  if (!before || !after) return null;
  const steps = after.steps - before.steps;
  return {
    shards: after.shards?.length ?? 1,
    steps,
    setupS: (after.setup_seconds ?? 0) - (before.setup_seconds ?? 0),
    decodeS: after.decode_seconds - before.decode_seconds,
    sampleS: after.sample_seconds - before.sample_seconds,
    roundTripS: after.step_round_trip_seconds - before.step_round_trip_seconds,
    hostS: after.host_seconds - before.host_seconds,
    tokensPerStep: steps > 0 ? (after.batch_tokens - before.batch_tokens) / steps : 0,
    promptTokensComputed: after.prompt_tokens_computed - before.prompt_tokens_computed,
    adapterTurnSteps: (after.adapter_turn_steps ?? 0) - (before.adapter_turn_steps ?? 0),
  };
}

/** Samples a process's resident set twice a second (Linux /proc) and keeps the largest. */
function rssSampler(pid: number | undefined) {
  let peak: number | null = null;
  const read = () => {
    if (pid === undefined) return;
    try {
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
      if (Number.isFinite(kb)) peak = Math.max(peak ?? 0, kb / 1024);
    } catch {
      // the process is gone, or this is not Linux
    }
  };
  read();
  const timer = setInterval(read, 500);
  return {
    peak: () => {
      read();
      return peak;
    },
    stop: () => clearInterval(timer),
  };
}

async function runRandom(target: Target, s: RandomScenario, seed: number): Promise<Timed[]> {
  const random = seededRandom(seed + 1);
  const prompts = randomPrompts(s.requests, s.inputTokens, seed);
  const tiers = prompts.map(() => pickShare(s.tierMix, random));
  // Drawn apart from the tiers, so that a mix of models leaves a scenario's tiers as they were.
  const models = s.modelMix ? exactShares(s.modelMix, s.requests, seededRandom(seed + 2)) : [];
  const results: Timed[] = [];
  const running = new Set<Promise<void>>();
  for (let i = 0; i < s.requests; i++) {
    while (running.size >= s.maxConcurrency) await Promise.race(running);
    const model = models[i];
    const request = streamChat(model ? { ...target, model } : target, prompts[i]!, s.outputTokens, tiers[i], s.sampling, s.fields).then(
      (r) => {
        results.push(model ? { ...r, model } : r);
      },
    );
    const tracked = request.finally(() => running.delete(tracked));
    running.add(tracked);
    if (Number.isFinite(s.requestRate)) await new Promise((resolve) => setTimeout(resolve, poissonGapMs(s.requestRate, random)));
  }
  await Promise.all(running);
  return results;
}

async function runClients(target: Target, s: ClientsScenario, seed: number): Promise<Timed[]> {
  const results: Timed[] = [];
  const until = performance.now() + s.durationS * 1000;
  const tiers = Object.entries(s.clients).flatMap(([tier, count]) => Array.from({ length: count }, () => tier));
  // Enough distinct prompts that no client finds another's (or its own last one) cached.
  const perClient = Math.ceil((s.durationS * 1000) / 200);
  await Promise.all(
    tiers.map(async (tier, client) => {
      const prompts = randomPrompts(perClient, s.inputTokens, seed + 1000 * (client + 1));
      for (let i = 0; performance.now() < until; i++) results.push(await streamChat(target, prompts[i % perClient]!, s.outputTokens, tier));
    }),
  );
  return results;
}

async function runMultiturn(target: Target, s: MultiturnScenario): Promise<Timed[]> {
  const results: Timed[] = [];
  const conversation = async (c: number) => {
    const messages: ChatMessage[] = [conversationSystemPrompt(c)];
    for (let turn = 0; turn < s.turns; turn++) {
      messages.push({ role: "user", content: FOLLOW_UPS[turn % FOLLOW_UPS.length]! });
      const result: Timed = { ...(await streamChat(target, messages, s.outputTokens, undefined)), turn };
      results.push(result);
      messages.push({ role: "assistant", content: result.content || "I see." });
    }
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(s.maxConcurrency, s.conversations) }, async () => {
      while (next < s.conversations) await conversation(next++);
    }),
  );
  return results;
}

/** A tier drawn by its share; undefined, drawing nothing, without a mix. */
function pickShare(mix: Record<string, number> | undefined, random: () => number): string | undefined {
  if (!mix) return undefined;
  let r = random() * Object.values(mix).reduce((a, b) => a + b, 0);
  for (const [key, share] of Object.entries(mix)) if ((r -= share) <= 0) return key;
  return Object.keys(mix).at(-1);
}

/** `count` keys of `mix`, each exactly its share of them (rounded; the last takes what is left), shuffled. */
function exactShares(mix: Record<string, number>, count: number, random: () => number): string[] {
  const total = Object.values(mix).reduce((a, b) => a + b, 0);
  const keys = Object.entries(mix).flatMap(([key, share], i, all) =>
    Array.from({ length: i === all.length - 1 ? 0 : Math.round((share / total) * count) }, () => key),
  );
  keys.push(...Array.from({ length: Math.max(0, count - keys.length) }, () => Object.keys(mix).at(-1)!));
  for (let i = keys.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [keys[i], keys[j]] = [keys[j]!, keys[i]!];
  }
  return keys.slice(0, count);
}

/** Each model's requests in a scenario that mixed models: completed and failed, output tokens per second of the whole scenario, TPOT and ITL. */
function byModel(results: Timed[], durationS: number): NonNullable<ScenarioReport["byModel"]> {
  const models: NonNullable<ScenarioReport["byModel"]> = {};
  for (const model of new Set(results.map((r) => r.model).filter((m) => m !== undefined))) {
    const mine = results.filter((r) => r.model === model);
    const done = mine.filter((r) => r.ok && r.ttftMs !== undefined);
    models[model] = {
      completed: done.length,
      failed: mine.length - done.length,
      outputTokensPerS: done.reduce((a, r) => a + r.outputTokens, 0) / durationS,
      tpotMs: summarize(done.filter((r) => r.outputTokens > 1).map((r) => (r.e2eMs - r.ttftMs!) / (r.outputTokens - 1))),
      itlMs: summarize(done.flatMap((r) => r.itlMs)),
    };
  }
  return models;
}

function report(target: Target, scenario: Scenario, results: Timed[], durationS: number): Omit<ScenarioReport, "peakRssMb" | "engine"> {
  const ok = results.filter((r) => r.ok && r.ttftMs !== undefined);
  const failed: ScenarioReport["failed"] = {};
  for (const r of results.filter((x) => !x.ok)) {
    const entry = (failed[r.errorCode ?? String(r.status)] ??= { count: 0, meanTimeToFailureS: 0 });
    entry.meanTimeToFailureS = (entry.meanTimeToFailureS * entry.count + r.e2eMs / 1000) / (entry.count + 1);
    entry.count++;
  }
  const outputTokens = ok.reduce((a, r) => a + r.outputTokens, 0);
  const reported = ok.filter((r) => r.cachedTokens !== undefined);
  const byTier: ScenarioReport["byTier"] = {};
  for (const tier of new Set(results.map((r) => r.tier))) {
    const mine = results.filter((r) => r.tier === tier);
    const done = mine.filter((r) => r.ok);
    byTier[tier] = {
      ttftMs: summarize(done.map((r) => r.ttftMs!)),
      itlMs: summarize(done.flatMap((r) => r.itlMs)),
      completed: done.length,
      failed: mine.length - done.length,
    };
  }
  return {
    scenario: scenario.name,
    target: target.name,
    durationS,
    completed: ok.length,
    failed,
    requestThroughput: ok.length / durationS,
    outputTokensPerS: outputTokens / durationS,
    meanOutputTokens: ok.length ? outputTokens / ok.length : 0,
    ttftMs: summarize(ok.map((r) => r.ttftMs!)),
    tpotMs: summarize(ok.filter((r) => r.outputTokens > 1).map((r) => (r.e2eMs - r.ttftMs!) / (r.outputTokens - 1))),
    itlMs: summarize(ok.flatMap((r) => r.itlMs)),
    e2eMs: summarize(ok.map((r) => r.e2eMs)),
    prefixCacheHitRate: reported.length
      ? reported.reduce((a, r) => a + r.cachedTokens!, 0) /
        Math.max(
          1,
          reported.reduce((a, r) => a + r.promptTokens, 0),
        )
      : null,
    byTier,
    ...(scenario.kind === "random" && scenario.modelMix ? { byModel: byModel(results, durationS) } : {}),
    ...(scenario.kind === "multiturn"
      ? {
          ttftFirstTurnMs: summarize(ok.filter((r) => r.turn === 0).map((r) => r.ttftMs!)),
          ttftLaterTurnsMs: summarize(ok.filter((r) => (r.turn ?? 0) > 0).map((r) => r.ttftMs!)),
        }
      : {}),
  };
}
