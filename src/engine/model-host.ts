import { availableParallelism } from "node:os";
import { randomInt } from "node:crypto";
import { chatTemplateFor } from "./chat-template.js";
import { StepCostModel } from "./core/cost-model.js";
import { chooseShard } from "./core/placement.js";
import { tieredPolicy } from "./core/policy.js";
import { EngineRequest } from "./core/request.js";
import { ShardScheduler, StalledError } from "./core/scheduler.js";
import { UnknownAdapterError } from "./errors.js";
import { LoadedAdapters } from "./adapter-set.js";
import { refuseWhenFull, startFlexWait } from "./tier-queue.js";
import { Shard, type StepCounters } from "./core/shard.js";
import { ShardGroup } from "./core/shard-group.js";
import { DRAFT_TOKENS_PER_STEP, type SpeculationMode } from "./core/speculation.js";
import type { TargetsByTier } from "./core/step-budget.js";
import { constraintToGbnf } from "./grammar/index.js";
import { loadModel } from "./native/loaded-model.js";
import { nonEmptyPrompt } from "./prompt/empty-prompt.js";
import { startPromptPool } from "./prompt/prompt-pool.js";
import { promptTokenizers } from "./prompt/prompt-tokenizers.js";
import { startShardRunner } from "./runner/shard-runner.js";
import type { SamplerSpec } from "./runner/step-protocol.js";
import type {
  ChatMessage,
  GenerationEvent,
  GenerationRequest,
  ModelHostStats,
  OutputConstraint,
  PauseControl,
  PromptOptions,
  RenderedPrompt,
  Token,
  ToolDefinition,
} from "./types.js";
import { sumPerTier, tierTotal } from "../protocol/tiers.js";

export interface ModelHostOptions {
  modelPath: string;
  /** Requests decoded together, over all shards (one KV stream of `contextWindow` cells each). */
  sequences: number;
  /** Most tokens (prompt + completion) one request may hold. */
  contextWindow: number;
  /** Jinja chat template to use when the GGUF carries none. */
  fallbackChatTemplate?: string;
  /** llama.cpp threads in all (default: one per core). */
  threads?: number;
  /** Independent step loops, each with its own context and runner thread (default: one per thread). */
  shards?: number;
  /** Tokens in one shard's step: decode tokens first, prompt chunks in what is left. */
  stepTokens?: number;
  maxWaiting: number;
  /** How long a flex request may wait for a sequence before it fails. */
  flexMaxWaitMs: number;
  /** Keep finished sequences' cells to reuse their prefix for the same namespace. */
  prefixCache: boolean;
  /** How long a request may hold a sequence without progress (paused, or stuck) before it fails with StalledError. */
  stallTimeoutMs: number;
  /** How long a request whose caller is not reading keeps its sequence before it is preempted (default: never). */
  pausedPreemptMs?: number;
  /** Per-tier time-to-first-token and inter-token targets the step budget keeps (default: step-budget.ts). */
  targets?: TargetsByTier;
  /** Speculative decoding: drafts from each request's prediction and from prompt lookup (default: auto). */
  speculation?: SpeculationMode;
  /** LoRA adapters (GGUF) to load at start, each under the key requests name it by (GenerationRequest `adapter`). */
  adapters?: ReadonlyArray<{ key: string; path: string }>;
}

export interface ModelHost {
  /** Tokens one request may hold in all: prompt plus completion. */
  readonly contextWindow: number;
  readonly vocabularySize: number;
  /**
   * Renders the chat template and tokenizes. A large prompt is rendered on a worker thread, so the
   * caller's thread never spends time in proportion to a prompt's size.
   */
  tokenizeChat(messages: readonly ChatMessage[], tools?: readonly ToolDefinition[], options?: PromptOptions): Promise<RenderedPrompt>;
  /** A raw prompt's tokens, with no chat template: BOS first where the tokenizer adds one, special tokens parsed. */
  tokenizeText(text: string, options?: Pick<PromptOptions, "fairnessKey">): Promise<Token[]>;
  /** Tokens back into text, special tokens spelled out (`/detokenize`); ids must be below `vocabularySize`. */
  detokenize(tokens: readonly Token[]): string;
  /** The token as text, special tokens spelled out. */
  tokenText(token: Token): string;
  /** A prediction's text (Predicted Outputs) as the plain tokens the model would generate for it: no BOS. */
  tokenizePrediction(text: string, options?: Pick<PromptOptions, "fairnessKey">): Promise<Token[]>;
  /** Lower bounds on a prompt's tokens, found cheaply without rendering or tokenizing it. */
  minimumPromptTokens(messages: readonly ChatMessage[]): number;
  minimumTextTokens(text: string): number;
  /** Whether the model's chat template renders a `tools` list itself. */
  readonly templateRendersTools: boolean;
  /**
   * Streams the generation of each choice of one prompt (`n` requests that differ in their
   * sampling): admitted together, the prompt computed once and its cells copied. When `signal`
   * aborts, each stops within one step, frees its sequence and still ends with a `finish` event
   * (reason `cancelled`) so the tokens used can be metered. While `pause` is paused, they skip
   * their steps, and past `pausedPreemptMs` give their sequences up (preempted, to resume when it
   * is lifted); when it expires, they fail with StalledError. Throws QueueFullError, EmptyPromptError, or the grammar's
   * error for a schema it cannot express, before anything queues.
   */
  generate(choices: readonly GenerationRequest[], signal?: AbortSignal, pause?: PauseControl): AsyncGenerator<GenerationEvent>[];
  /**
   * Loads a GGUF LoRA adapter under `key` (a key already loaded is left as it is): its tensors once
   * for the model, applied by each shard to the steps that run its requests. Waits for the steps in
   * flight (adapter-set.ts). Throws if llama.cpp refuses it.
   */
  addAdapter(key: string, path: string): Promise<void>;
  /**
   * New requests under `key` fail with UnknownAdapterError from now; resolves once the ones that
   * hold it have ended and its tensors are freed.
   */
  removeAdapter(key: string): Promise<void>;
  stats(): ModelHostStats;
  close(): Promise<void>;
}

/**
 * A prompt chunk of 256 tokens takes ~0.3 s on one core for a 135M model, so a running stream
 * waits at most that long for its next token while a long prompt loads.
 */
const DEFAULT_STEP_TOKENS = 256;

/** Prompt workers per model: two, so that one huge prompt leaves another worker free. */
const PROMPT_WORKERS = 2;

/**
 * Loads the model once and starts its shards: K independent step loops over K contexts of one
 * thread each (K = threads by default), the sequences split between them. llama.cpp's CPU
 * threads wait for each other in a spin loop, so one context with 2 threads on 2 cores loses more
 * than half its speed whenever anything else wants a core; shards of one thread never wait on
 * each other.
 */
export async function loadModelHost(options: ModelHostOptions): Promise<ModelHost> {
  const model = loadModel(options.modelPath);
  // Workers that use the model's weights: each is stopped before the model is freed on a failed load.
  const started: Array<{ close(): Promise<void> }> = [];
  try {
    const contextWindow = Math.min(options.contextWindow, model.trainContextSize);
    const template = chatTemplateFor(model, options.fallbackChatTemplate);
    const prompts = await startPromptPool(
      { libraryDir: model.libraryDir, model: model.handle, templateSource: template.source },
      PROMPT_WORKERS,
    );
    started.push(prompts);
    const threads = Math.max(1, options.threads ?? availableParallelism());
    const shardCount = Math.max(1, Math.min(options.shards ?? threads, options.sequences));
    // Each shard's threadpool holds every thread; the group decides how many a step uses.
    const group = new ShardGroup(threads);
    let shards: Shard[] = [];
    const adapters = new LoadedAdapters(model, group.gate, () => shards);
    for (const { key, path } of options.adapters ?? []) adapters.addNow(key, path);
    const router = new ShardRouter(options, model.bosToken, adapters);
    // Every shard's start settles before a failure is thrown, so each worker that started is in `started`.
    const starting = await Promise.allSettled(
      Array.from({ length: shardCount }, async (_, i) => {
        const sequences = Math.floor(options.sequences / shardCount) + (i < options.sequences % shardCount ? 1 : 0);
        const stepTokens = Math.max(options.stepTokens ?? DEFAULT_STEP_TOKENS, sequences + 1);
        const runner = await startShardRunner({
          libraryDir: model.libraryDir,
          model: model.handle,
          sequences,
          cellsPerSequence: contextWindow,
          batchTokens: stepTokens,
          threads,
          draftTokens: DRAFT_TOKENS_PER_STEP,
        });
        started.push(runner);
        const { prefixCache, targets, stallTimeoutMs, pausedPreemptMs, speculation = "auto" } = options;
        const schedulerOptions = {
          shard: i,
          sequences,
          cellsPerSequence: contextWindow,
          stepTokens,
          prefixCache,
          targets,
          stallTimeoutMs,
          pausedPreemptMs,
          speculation,
        };
        const scheduler = new ShardScheduler(schedulerOptions, tieredPolicy, model, new StepCostModel(), () => router.steal(scheduler));
        return new Shard(scheduler, runner, group);
      }),
    );
    const failed = starting.find((result) => result.status === "rejected");
    if (failed) throw failed.reason;
    shards = starting.map((result) => (result as PromiseFulfilledResult<Shard>).value);
    group.shards = shards;
    router.attach(shards);
    return {
      contextWindow,
      vocabularySize: model.vocabularySize,
      ...promptTokenizers(model, template, prompts),
      detokenize: model.detokenize,
      tokenText: model.tokenText,
      templateRendersTools: template.rendersTools,
      generate: (request, signal, pause) => router.generate(request, signal, pause),
      addAdapter: (key, path) => adapters.add(key, path),
      removeAdapter: (key) => adapters.remove(key),
      stats: () => router.stats(),
      close: async () => {
        await adapters.close();
        await Promise.all(shards.map((shard) => shard.close()));
        await prompts.close();
        model.free();
      },
    };
  } catch (error) {
    // Freeing the weights under a worker still using them (another shard starting) would crash the process.
    await Promise.allSettled(started.map((worker) => worker.close()));
    model.free();
    throw error;
  }
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
class ShardRouter {
  private shards: Shard[] = [];
  private readonly grammars = new Map<string, string>();

  constructor(
    private readonly options: ModelHostOptions,
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
    const slots = all.reduce((n, s) => n + s.sequences, 0);
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
    chooseShard(live, request).scheduler.enqueue(request);
    // Every shard may look: an idle one takes the request if the chosen one has no room.
    for (const shard of this.shards) shard.wake();
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
