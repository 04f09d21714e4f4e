import { randomInt } from "node:crypto";
import { adapterKeyOf, otherAdaptersOn } from "./core/adapter-turns.js";
import { separatingMoves } from "./core/adapter-moves.js";
import { chooseShard } from "./core/placement.js";
import { EngineRequest } from "./core/request.js";
import { StalledError, type ShardScheduler } from "./core/scheduler.js";
import type { Shard, StepCounters } from "./core/shard.js";
import { UnknownAdapterError } from "./errors.js";
import type { LoadedAdapters } from "./adapter-set.js";
import { refuseWhenFull, startFlexWait } from "./tier-queue.js";
import { constraintToGbnf } from "./grammar/index.js";
import { nonEmptyPrompt } from "./prompt/empty-prompt.js";
import type { SamplerSpec } from "./runner/step-protocol.js";
import type { GenerationEvent, GenerationRequest, ModelHostStats, OutputConstraint, PauseControl, Token } from "./types.js";
import { sumPerTier, tierTotal } from "../protocol/tiers.js";

/**
 * For this long after requests of two adapters (or an adapter and the base) were last in flight
 * together, placement keeps empty shards for an adapter that has none (core/placement.ts): a group
 * that drains for a moment does not let the other spread onto its shard, to be mixed there at the
 * group's next request.
 */
const MIXED_LINGER_MS = 10_000;

/** What the router bounds: the waiting requests, and how long a flex request may wait for a sequence. */
export interface RouterOptions {
  /** Requests the model decodes at once, over all its shards (each shard may hold more: core/sequence-cap.ts). */
  sequences: number;
  maxWaiting: number;
  flexMaxWaitMs: number;
}

/**
 * The prefix-cache namespace with the adapter in it: KV computed under an adapter is reused only by
 * requests of the same namespace under the same adapter, never by the base model or another adapter.
 */
export function cacheNamespaceOf(spec: Pick<GenerationRequest, "cacheNamespace" | "adapter">): string | undefined {
  if (spec.cacheNamespace === undefined || spec.adapter === undefined) return spec.cacheNamespace;
  return `${spec.cacheNamespace}\u0000lora:${spec.adapter}`;
}

/**
 * Places requests on shards, bounds the queue, expires flex waits, and hands aborts to the owning
 * shard. The requests wait in the shards' schedulers (in the tier policy's order), so of the tier
 * queue only the cap and the flex wait are used here (tier-queue.ts), with its refusals and messages.
 */
export class ShardRouter {
  private shards: Shard[] = [];
  private readonly grammars = new Map<string, string>();
  /** When requests of several adapters were last in flight together (performance.now()). */
  private mixedAt = -Infinity;

  constructor(
    private readonly options: RouterOptions,
    private readonly bos: Token | undefined,
    private readonly adapters: Pick<LoadedAdapters, "get">,
  ) {}

  attach(shards: Shard[]): void {
    this.shards = shards;
  }

  /** The choices of one prompt: submitted as one group, each its own stream of events. */
  generate(specs: readonly GenerationRequest[], signal?: AbortSignal, pause?: PauseControl): AsyncGenerator<GenerationEvent>[] {
    signal?.throwIfAborted();
    // Whatever path a request came by, none with no prompt tokens queues: it would never be scheduled.
    const requests = specs
      .map((spec) => ({ ...spec, promptTokens: nonEmptyPrompt(spec.promptTokens, this.bos), cacheNamespace: cacheNamespaceOf(spec) }))
      .map((spec) => new EngineRequest(spec, this.samplerSpec(spec), this.adapterOf(spec)));
    // The cap bounds waiting: while a sequence is free somewhere, the request need not wait, so it is not refused.
    if (!this.shards.some((s) => s.scheduler.freeSequences > 0)) {
      refuseWhenFull(this.waitingCount(), 1, { maxWaiting: this.options.maxWaiting, unit: "requests" });
    }
    // A group is admitted on one shard, all at once: one larger than a shard is split into groups
    // that fit (each computes the prompt once), or it would wait forever for its own sequences.
    const size = Math.min(...this.shards.map((s) => s.scheduler.sequenceCount));
    for (let at = 0; at < requests.length; at += size) {
      const [leader, ...siblings] = requests.slice(at, at + size);
      leader!.siblings.push(...siblings);
      this.place(leader!);
    }
    const stopFlexWait = startFlexWait(requests[0]!.tier, this.options.flexMaxWaitMs, (expired) =>
      requests.forEach((r) => this.expire(r, expired)),
    );
    const onAbort = () => requests.forEach((r) => this.abort(r, signal?.reason));
    signal?.addEventListener("abort", onAbort, { once: true });
    const unsubscribe = pause?.subscribe(() =>
      pause.expired === undefined ? this.setPaused(requests, pause.paused) : this.endUnread(requests, pause.expired),
    );
    if (pause?.paused) this.setPaused(requests, true);
    let open = requests.length;
    const closed = () => {
      if (--open > 0) return;
      stopFlexWait();
      signal?.removeEventListener("abort", onAbort);
      unsubscribe?.();
    };
    return requests.map((request) => this.stream(request, closed));
  }

  private async *stream(request: EngineRequest, closed: () => void): AsyncGenerator<GenerationEvent> {
    try {
      yield* request.events.drain();
    } finally {
      closed();
      if (request.status !== "finished") this.abort(request, new Error("the caller stopped reading"));
    }
  }

  /** A request another shard gives away (its scheduler decides which), for an idle one. */
  steal(thief: ShardScheduler): EngineRequest | undefined {
    for (const shard of this.shards) {
      if (shard.scheduler === thief || shard.failure) continue;
      const request = shard.scheduler.giveAway();
      if (request) return request;
    }
    return undefined;
  }

  stats(): ModelHostStats {
    const all = this.shards.map((s) => s.scheduler.stats());
    const running = sumPerTier(all, (s) => s.running);
    const slots = Math.min(
      this.options.sequences,
      all.reduce((n, s) => n + s.sequences, 0),
    );
    return {
      slots,
      running,
      waiting: sumPerTier(all, (s) => s.waiting),
      preemptions: all.reduce((n, s) => n + s.preemptions, 0),
      paused: all.reduce((n, s) => n + s.paused, 0),
      idleSequences: slots - tierTotal(running),
      prioritySaturated: all.some((s) => s.prioritySaturated),
      kvCacheUsage:
        all.reduce((n, s) => n + s.usedCells, 0) /
        Math.max(
          1,
          all.reduce((n, s) => n + s.totalCells, 0),
        ),
      stepBudgets: all.map(({ budget, speculation }, i) => ({
        budgetMs: budget.ms,
        tokens: budget.tokens,
        plannedMs: budget.plannedMs,
        speculation,
        costModel: this.shards[i]!.scheduler.cost.coefficients,
      })),
      engine: Object.fromEntries(
        (Object.keys(this.shards[0]!.counters) as (keyof StepCounters)[]).map((key) => [
          key,
          this.shards.reduce((n, shard) => n + shard.counters[key], 0),
        ]),
      ) as unknown as StepCounters,
    };
  }

  /** Queues the request on the shard core/placement.ts chooses. */
  private place(request: EngineRequest): void {
    // A shard whose runner thread died takes nothing: a request placed there would wait forever.
    const live = this.shards.filter((shard) => !shard.failure);
    if (live.length === 0) throw this.shards[0]!.failure!;
    if (request.adapter !== undefined || this.mixedAt > -Infinity) this.noteMixed(request);
    // Once adapters have not been in flight beside others for a while, placement and moves ignore them.
    const mixed = performance.now() - this.mixedAt < MIXED_LINGER_MS;
    chooseShard(live, request, mixed).scheduler.enqueue(request);
    if (mixed) this.separate(live);
    // Every shard may look: an idle one takes the request if the chosen one has no room.
    for (const shard of this.shards) shard.wake();
  }

  /** Moves running requests so that no shard mixes adapters where another has room for one (core/adapter-moves.ts). */
  private separate(live: readonly Shard[]): void {
    for (const { request, to } of separatingMoves(live)) {
      if (request.status === "waiting") {
        if (this.owner(request)?.scheduler.withdraw(request)) to.scheduler.enqueue(request);
        to.wake();
        continue;
      }
      request.moveTo = (output) => {
        if (to.failure) return false;
        to.scheduler.takeOver(request, output);
        to.wake();
        return true;
      };
      this.owner(request)?.wake();
    }
  }

  /** Whether the request's adapter (or the base) and another are in flight together now. */
  private noteMixed(request: EngineRequest): void {
    const key = adapterKeyOf(request);
    if (this.shards.some(({ scheduler }) => otherAdaptersOn(scheduler, key) > 0)) this.mixedAt = performance.now();
  }

  private owner(request: EngineRequest): Shard | undefined {
    return request.shard === undefined ? undefined : this.shards[request.shard];
  }

  private abort(request: EngineRequest, reason: unknown): void {
    const shard = this.owner(request);
    shard?.scheduler.abort(request, reason);
    shard?.wake();
  }

  /** Paused requests skip their steps (their shard's scheduler records it); resumed, their shard wakes. */
  private setPaused(requests: readonly EngineRequest[], paused: boolean): void {
    for (const request of requests) {
      const shard = this.owner(request);
      shard?.scheduler.setPaused(request, paused);
      if (!paused) shard?.wake();
    }
  }

  /** The caller stopped waiting for its reader: each request ends with a timeout error (billed for what it generated). */
  private endUnread(requests: readonly EngineRequest[], message: string): void {
    for (const request of requests) {
      const shard = this.owner(request);
      shard?.scheduler.fail(request, new StalledError(message));
      shard?.wake();
    }
  }

  /** A flex request still waiting for its first admission when its wait limit ends. */
  private expire(request: EngineRequest, expired: Error): void {
    this.owner(request)?.scheduler.expire(request, expired);
  }

  private waitingCount(): number {
    return this.shards.reduce((n, s) => n + s.scheduler.waiting.filter((r) => !r.resumed).length, 0);
  }

  private adapterOf(spec: GenerationRequest): { key: string; handle: bigint } | undefined {
    if (spec.adapter === undefined) return undefined;
    const handle = this.adapters.get(spec.adapter);
    if (handle === undefined) throw new UnknownAdapterError(`The LoRA adapter '${spec.adapter}' is not loaded for this model.`);
    return { key: spec.adapter, handle };
  }

  private samplerSpec(spec: GenerationRequest): SamplerSpec {
    const s = spec.sampling;
    return {
      temperature: s.temperature,
      topP: s.topP,
      topK: s.topK ?? 0,
      minP: s.minP ?? 0,
      seed: s.seed ?? randomInt(2 ** 31),
      presencePenalty: s.presencePenalty ?? 0,
      frequencyPenalty: s.frequencyPenalty ?? 0,
      repetitionPenalty: s.repetitionPenalty ?? 1,
      // A bias of -100 or below bans the token, as OpenAI's does.
      logitBias: [...(s.logitBias ?? new Map())].map(([token, bias]) => [token, bias <= -100 ? -Infinity : bias]),
      ...(spec.constraint ? { grammar: this.grammar(spec.constraint) } : {}),
    };
  }

  /** GBNF text, built once per distinct constraint; a schema it cannot express throws before the request queues. */
  private grammar(constraint: OutputConstraint): string {
    const key = JSON.stringify(constraint);
    let text = this.grammars.get(key);
    if (text === undefined) {
      text = constraintToGbnf(constraint);
      if (this.grammars.size >= 64) this.grammars.delete(this.grammars.keys().next().value!);
      this.grammars.set(key, text);
    }
    return text;
  }
}
