import { availableParallelism } from "node:os";
import { chatTemplateFor } from "./chat-template.js";
import { StepCostModel } from "./core/cost-model.js";
import { tieredPolicy } from "./core/policy.js";
import { ShardScheduler } from "./core/scheduler.js";
import { LoadedAdapters } from "./adapter-set.js";
import { Shard } from "./core/shard.js";
import { ShardGroup } from "./core/shard-group.js";
import { SequenceCap, UNCAPPED } from "./core/sequence-cap.js";
import { DRAFT_TOKENS_PER_STEP, type SpeculationMode } from "./core/speculation.js";
import type { TargetsByTier } from "./core/step-budget.js";
import { loadModel, type LoadedModel } from "./native/loaded-model.js";
import { startPromptPool } from "./prompt/prompt-pool.js";
import { promptTokenizers } from "./prompt/prompt-tokenizers.js";
import { startShardRunner } from "./runner/shard-runner.js";
import { ShardRouter } from "./shard-router.js";
import type {
  ChatMessage,
  GenerationEvent,
  GenerationRequest,
  ModelHostStats,
  PauseControl,
  PromptOptions,
  RenderedPrompt,
  Token,
  ToolDefinition,
} from "./types.js";

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
  /**
   * Each shard holds twice its share of the sequences (up to all of them), so that placement can keep
   * each LoRA adapter's requests on shards of their own rather than take turns with the base's; the
   * model still decodes at most `sequences` requests at once (core/sequence-cap.ts). Costs the extra
   * sequences' KV memory. Default: off.
   */
  adapterRoom?: boolean;
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
    shards = await startShards(model, options, { contextWindow, threads, shardCount, group, router }, started);
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
 * Starts `shardCount` step loops, the sequences split between them, each with its runner thread.
 * Every shard's start settles before a failure is thrown, so each worker that started is in `started`.
 */
async function startShards(
  model: LoadedModel,
  options: ModelHostOptions,
  { contextWindow, threads, shardCount, group, router }: ShardLayout,
  started: Array<{ close(): Promise<void> }>,
): Promise<Shard[]> {
  const { prefixCache, targets, stallTimeoutMs, pausedPreemptMs, speculation = "auto" } = options;
  // Without adapter room the shards' own sequences add up to the model's: no cap to keep, nothing to wake.
  const cap = options.adapterRoom ? new SequenceCap(options.sequences, () => group.shards) : UNCAPPED;
  const starting = await Promise.allSettled(
    Array.from({ length: shardCount }, async (_, i) => {
      const share = Math.floor(options.sequences / shardCount) + (i < options.sequences % shardCount ? 1 : 0);
      const sequences = options.adapterRoom ? Math.min(options.sequences, 2 * share) : share;
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
      const schedulerOptions = {
        shard: i,
        sequences,
        share,
        cellsPerSequence: contextWindow,
        stepTokens,
        prefixCache,
        targets,
        stallTimeoutMs,
        pausedPreemptMs,
        speculation,
      };
      const steal = () => router.steal(scheduler);
      const scheduler = new ShardScheduler(schedulerOptions, tieredPolicy, model, new StepCostModel(), steal, cap);
      return new Shard(scheduler, runner, group);
    }),
  );
  const failed = starting.find((result) => result.status === "rejected");
  if (failed) throw failed.reason;
  return starting.map((result) => (result as PromiseFulfilledResult<Shard>).value);
}

interface ShardLayout {
  contextWindow: number;
  /** llama.cpp threads each shard's threadpool holds. */
  threads: number;
  shardCount: number;
  group: ShardGroup;
  router: ShardRouter;
}
