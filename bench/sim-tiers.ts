/**
 * The tier mix in virtual time: the engine's real schedulers, policy, placement and step budget,
 * driven by a closed loop of clients against a machine whose step cost is a known function (no
 * model, no noise). Shows what the scheduling alone does to each tier's TTFT and inter-token
 * latency, before any machine noise: every figure is exact and repeatable, so a policy change can be
 * judged in seconds and then confirmed by `bench:compare`'s real mix.
 *
 *   npx tsx bench/sim-tiers.ts [--clients 48] [--requests 400] [--shards 2] [--sequences 16] [--out f]
 *
 * The default machine is SmolLM2-135M on one core per shard, fitted to what bench:compare measures on
 * a 2-core EPYC (c16 about 120 tok/s, one stream alone 11 ms a token): ms = 7 + 8.4·decode +
 * 7·prompt + 1.4·attended/1024; a shard alone gets both cores (1.4 times as fast), as the real
 * shards share their threads.
 */
import { writeFileSync } from "node:fs";
import { Command } from "commander";
import { StepCostModel, type StepShape } from "../src/engine/core/cost-model.js";
import { chooseShard } from "../src/engine/core/placement.js";
import { tieredPolicy } from "../src/engine/core/policy.js";
import { EngineRequest } from "../src/engine/core/request.js";
import { ShardScheduler } from "../src/engine/core/scheduler.js";
import type { StepPlan } from "../src/engine/core/step-plan.js";
import type { StepReply } from "../src/engine/runner/step-protocol.js";
import type { PerTier, ServiceTier } from "../src/protocol/tiers.js";
import { summarize as stats } from "./load/stats.js";
import { GREEDY_SAMPLER as SAMPLER } from "../test/helpers/scheduler-steps.js";

const program = new Command()
  .option("--clients <n>", "closed-loop clients", "48")
  .option("--requests <n>", "requests in all", "400")
  .option("--shards <n>", "shards (one core each)", "2")
  .option("--sequences <n>", "sequences in all", "16")
  .option("--prompt <n>", "prompt tokens", "128")
  .option("--output <n>", "output tokens", "64")
  .option("--mix <p,d,f>", "shares of the priority, default and flex tiers", "0.2,0.5,0.3")
  .option("--out <file>", "JSON results")
  .parse();
const opts = program.opts<Record<string, string>>();
const COST = [7, 8.4, 7, 1.4];
/** Two threads on two cores are about 1.4 times as fast as one (measured: 11 ms a token alone, 8.4 ms more per stream in a one-thread batch). */
const SPEEDUP = [1, 1, 1.4];
const truth = (shape: StepShape, cores: number) =>
  (COST[0]! + COST[1]! * shape.decodeTokens + COST[2]! * shape.promptTokens + (COST[3]! * shape.attended) / 1024) /
  SPEEDUP[Math.min(cores, 2)]!;

const texts = { pieceBytes: () => new Uint8Array([97]), tokenText: () => "a", isEndOfGeneration: () => false };

interface Timing {
  tier: ServiceTier;
  arrived: number;
  tokens: number[];
}

/** Runs one closed-loop workload; returns every request's arrival and token times (virtual ms). */
function simulate(clients: number, total: number, mix: PerTier<number>, seed = 1): Timing[] {
  const shardCount = Number(opts.shards);
  const perShard = Math.floor(Number(opts.sequences) / shardCount);
  let random = seed;
  const next = () => (random = (random * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const pickTier = (): ServiceTier => {
    const x = next();
    return x < mix.priority ? "priority" : x < mix.priority + mix.default ? "default" : "flex";
  };
  const shards: Array<{ scheduler: ShardScheduler; freeAt: number; plan?: StepPlan }> = [];
  for (let i = 0; i < shardCount; i++) {
    const scheduler = new ShardScheduler(
      { shard: i, sequences: perShard, cellsPerSequence: 2048, stepTokens: 256, prefixCache: false },
      tieredPolicy,
      texts,
      new StepCostModel({ prior: COST }),
      () =>
        shards
          .filter((s) => s.scheduler !== scheduler)
          .map((s) => s.scheduler.giveAway())
          .find((r) => r !== undefined),
    );
    shards.push({ scheduler, freeAt: 0 });
  }
  const timings = new Map<EngineRequest, Timing>();
  let sent = 0;
  let now = 0;
  const send = () => {
    if (sent >= total) return;
    sent++;
    const tier = pickTier();
    const promptTokens = Array.from({ length: Number(opts.prompt) }, (_, i) => 1 + ((i + sent * 7) % 500));
    const request = new EngineRequest(
      { promptTokens, maxTokens: Number(opts.output), sampling: { temperature: 0, topP: 1 }, stop: [], tier },
      SAMPLER,
    );
    timings.set(request, { tier, arrived: now, tokens: [] });
    chooseShard(shards, request).scheduler.enqueue(request);
  };
  for (let i = 0; i < clients; i++) send();
  while ([...timings.values()].some((t) => t.tokens.length < Number(opts.output)) || sent < total) {
    // The shard that is free first plans its next step; the other shards' cores are lent if idle.
    const shard = shards.reduce((a, b) => (b.freeAt < a.freeAt ? b : a));
    now = Math.max(now, shard.freeAt);
    const plan = shard.scheduler.schedule();
    if (plan.batchSize === 0) {
      shard.freeAt = Math.min(
        ...shards
          .filter((s) => s !== shard)
          .map((s) => s.freeAt)
          .filter((t) => t > now),
        now + 1,
      );
      continue;
    }
    const busy = shards.filter((s) => s === shard || s.freeAt > now).length;
    const ms = truth(plan.shape, Math.max(1, Math.floor(shardCount / busy)));
    shard.freeAt = now + ms;
    const reply: StepReply = {
      type: "step",
      tokens: Int32Array.from(plan.sampled.map(() => 1)),
      logprobs: plan.sampled.map(() => null),
      failedSamplers: [],
      failedRestores: [],
      setupMs: 0,
      decodeMs: ms,
      sampleMs: 0,
    };
    shard.scheduler.cost.observe(plan.shape, ms);
    shard.scheduler.update(plan, reply);
    for (const request of plan.sampled) {
      const timing = timings.get(request)!;
      timing.tokens.push(now + ms);
      if (timing.tokens.length === Number(opts.output)) queueMicrotaskSend(now + ms);
    }
  }
  return [...timings.values()];

  // A finished client sends its next request when its last token arrives.
  function queueMicrotaskSend(at: number) {
    const saved = now;
    now = at;
    send();
    now = saved;
  }
}

function summarize(timings: Timing[]) {
  const byTier: Record<string, { n: number; ttftP50: number; ttftP99: number; itlP50: number; itlP99: number; tokensPerS?: number }> = {};
  for (const tier of ["priority", "default", "flex"] as const) {
    const mine = timings.filter((t) => t.tier === tier && t.tokens.length > 0);
    if (mine.length === 0) continue;
    const ttft = mine.map((t) => t.tokens[0]! - t.arrived);
    const itl = mine.flatMap((t) => t.tokens.slice(1).map((x, i) => x - t.tokens[i]!));
    byTier[tier] = { n: mine.length, ttftP50: stats(ttft).p50, ttftP99: stats(ttft).p99, itlP50: stats(itl).p50, itlP99: stats(itl).p99 };
  }
  const end = Math.max(...timings.flatMap((t) => t.tokens));
  for (const v of Object.values(byTier)) v.tokensPerS = (timings.reduce((n, t) => n + t.tokens.length, 0) / end) * 1000;
  return byTier;
}

const [p, d, f] = opts.mix!.split(",").map(Number);
const unloaded = summarize(simulate(1, 8, { priority: 1, default: 0, flex: 0, batch: 0 }));
// Priority's own load alone: as many priority clients as the mix has on average, no other tier.
const priorityClients = Math.max(1, Math.round(Number(opts.clients) * p!));
const alone = summarize(simulate(priorityClients, Math.round(Number(opts.requests) * p!), { priority: 1, default: 0, flex: 0, batch: 0 }));
const loaded = summarize(simulate(Number(opts.clients), Number(opts.requests), { priority: p!, default: d!, flex: f!, batch: 0 }));
const round = (n: number) => Math.round(n);
console.table(
  Object.entries({
    "priority unloaded": unloaded,
    [`priority alone, ${priorityClients} clients`]: alone,
    ...Object.fromEntries(Object.entries(loaded).map(([tier, v]) => [`mix: ${tier}`, { [tier]: v }])),
  }).flatMap(([name, tiers]) =>
    Object.values(tiers).map((v) => ({
      name,
      n: v.n,
      "ttft p50": round(v.ttftP50),
      "ttft p99": round(v.ttftP99),
      "itl p50": round(v.itlP50),
      "itl p99": round(v.itlP99),
      "all tok/s": round(v.tokensPerS ?? 0),
    })),
  ),
);
const ratios = {
  "priority TTFT p99 loaded/unloaded (target <= 2)": loaded.priority!.ttftP99 / unloaded.priority!.ttftP99,
  "priority ITL p99 loaded/unloaded (target <= 1.5)": loaded.priority!.itlP99 / unloaded.priority!.itlP99,
  "priority TTFT p99 loaded/alone": loaded.priority!.ttftP99 / alone.priority!.ttftP99,
  "priority ITL p99 loaded/alone": loaded.priority!.itlP99 / alone.priority!.itlP99,
};
console.table(Object.entries(ratios).map(([what, ratio]) => ({ what, ratio: Number(ratio.toFixed(2)) })));
if (opts.out) writeFileSync(opts.out, JSON.stringify({ options: opts, cost: COST, unloaded, alone, loaded, ratios }, null, 2));
