import { randomInt } from "node:crypto";
import { availableParallelism } from "node:os";
import {
  getLlama,
  LlamaGrammarEvaluationState,
  TokenBias,
  type Llama,
  type EvaluationPriority,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaContextSequenceRepeatPenalty,
  type LlamaGrammar,
  type LlamaModel,
  type SequenceEvaluateOptions,
} from "node-llama-cpp";
import { decodeFirstThenPrefill, EVALUATION_PRIORITY } from "./batch-policy.js";
import { chatTemplateFor, type ChatTemplate } from "./chat-template.js";
import { JsonEnd } from "./json-end.js";
import { normalizeJsonSchema } from "./json-schema-support.js";
import { SlotScheduler, type SlotLease } from "./scheduler.js";
import { SequencePool, type TakenSequence } from "./sequence-pool.js";
import { StepGate } from "./step-gate.js";
import { TextStream } from "./text-stream.js";
import type {
  ChatMessage,
  EngineEvent,
  FinishReason,
  GenerationRequest,
  ModelHostStats,
  OutputConstraint,
  PromptOptions,
  RenderedPrompt,
  SamplingSettings,
  Token,
  TokenAlternative,
  TokenLogprob,
  ToolDefinition,
} from "./types.js";

export interface ModelHostOptions {
  modelPath: string;
  /** Sequences decoded together in one context (continuous batching across them). */
  sequences: number;
  /** Most tokens (prompt + completion) one request may hold; each sequence has a KV cache this size. */
  contextWindow: number;
  /** Jinja chat template to use when the GGUF carries none. */
  fallbackChatTemplate?: string;
  threads?: number;
  /** Tokens evaluated per decode step, over all sequences: decode tokens first, prompt chunks in what is left. */
  stepTokens?: number;
  maxWaiting: number;
  /** How long a flex request may wait for a sequence before it fails. */
  flexMaxWaitMs: number;
  /** Keep finished sequences' cells to reuse their prefix for the same namespace. */
  prefixCache: boolean;
}

export interface ModelHost {
  /** Tokens one request may hold in all: prompt plus completion. */
  readonly contextWindow: number;
  readonly vocabularySize: number;
  tokenizeChat(messages: readonly ChatMessage[], tools?: readonly ToolDefinition[], options?: PromptOptions): RenderedPrompt;
  /**
   * A raw prompt (legacy completions), no chat template: BOS first when the model's tokenizer adds
   * one, and special-token text recognised, as llama-server tokenizes a completion prompt.
   */
  tokenizeText(text: string): Token[];
  /** Whether the model's chat template renders a `tools` list itself. */
  readonly templateRendersTools: boolean;
  /**
   * Streams the generation. When `signal` aborts it stops within one decode step, frees its sequence
   * and still ends with a `finish` event (reason `cancelled`) so the tokens used can be metered.
   */
  generate(request: GenerationRequest, signal?: AbortSignal): AsyncGenerator<EngineEvent>;
  stats(): ModelHostStats;
  close(): Promise<void>;
}

let llamaPromise: Promise<Llama> | undefined;

/** One llama.cpp runtime per process, CPU build from the prebuilt binaries; never compiles. */
function loadLlama(): Promise<Llama> {
  llamaPromise ??= getLlama({ gpu: false, build: "never", logLevel: "error" as never });
  return llamaPromise;
}

export async function loadModelHost(options: ModelHostOptions): Promise<ModelHost> {
  const llama = await loadLlama();
  const model = await llama.loadModel({ modelPath: options.modelPath });
  const contextWindow = Math.min(options.contextWindow, model.trainContextSize);
  // node-llama-cpp gives every sequence its own KV cache of `contextSize` cells.
  const context = await model.createContext({
    sequences: options.sequences,
    contextSize: contextWindow,
    // llama.cpp's workers spin-wait on each other, so more threads than cores stalls them all:
    // node-llama-cpp's default (4 threads on this 2-core machine) ran at 0.2 tok/s. One per core,
    // with libuv's pool held to one thread (bin/switchyard.js): on 2 cores, 2 threads gave 1.4x the
    // tokens/s of 1 at 1 and at 16 streams, and no longer stalled. With one pool thread, two models
    // never decode at the same moment either, so their threads never outnumber the cores.
    threads: options.threads ?? availableParallelism(),
    batchSize: options.stepTokens ?? DEFAULT_STEP_TOKENS,
    batching: { itemPrioritizationStrategy: decodeFirstThenPrefill },
  });
  const scheduler = new SlotScheduler({ slots: options.sequences, maxWaiting: options.maxWaiting, flexMaxWaitMs: options.flexMaxWaitMs });
  const gate = new StepGate();
  const pool = new SequencePool(context, options.prefixCache, gate);
  // A chunk leaves room in the step for every running sequence's decode token.
  const prefillChunk = Math.max(1, (options.stepTokens ?? DEFAULT_STEP_TOKENS) - options.sequences);
  return createHost(llama, model, context, chatTemplateFor(model, options.fallbackChatTemplate), scheduler, pool, gate, contextWindow, prefillChunk);
}

/**
 * Prompt evaluation runs at ~170 tokens/s per core for a 135M model here, so a step of 128 tokens
 * holds the running streams' next token back by under a second while a long prompt loads.
 */
const DEFAULT_STEP_TOKENS = 128;

function createHost(
  llama: Llama,
  model: LlamaModel,
  context: LlamaContext,
  template: ChatTemplate,
  scheduler: SlotScheduler,
  pool: SequencePool,
  gate: StepGate,
  contextWindow: number,
  prefillChunk: number,
): ModelHost {
  const detokenize = (tokens: readonly Token[], lastTokens: readonly Token[]) => model.detokenize(tokens, false, lastTokens);
  const grammars = grammarCache(llama);

  /**
   * Evaluates all but the last `prefillChunk` tokens of `input`, one chunk per decode step, and
   * returns the rest (which the sampling call evaluates). Each chunk is its own evaluation, so
   * between chunks the running sequences queue their next token and share the next step: handed
   * the whole prompt at once, llama.cpp's batch loop would run chunk after chunk without them.
   */
  async function prefill(sequence: LlamaContextSequence, input: readonly Token[], evaluationPriority: EvaluationPriority, signal: AbortSignal | undefined, preemption: AbortSignal): Promise<Token[]> {
    let rest = input.slice();
    // A preempted request stops between chunks: the request waiting for its sequence should not wait out a whole prompt.
    while (rest.length > prefillChunk && !signal?.aborted && !preemption.aborted) {
      await sequence.evaluateWithoutGeneratingNewTokens(rest.slice(0, prefillChunk), { evaluationPriority });
      rest = rest.slice(prefillChunk);
      await gate.wait();
    }
    return rest;
  }

  async function* generate(request: GenerationRequest, signal?: AbortSignal): AsyncGenerator<EngineEvent> {
    // A schema the grammar cannot express is refused before the request waits for a sequence.
    const grammar = request.constraint ? await grammars.get(request.constraint) : undefined;
    const schedulingClass = request.schedulingClass ?? "standard";
    const namespace = request.cacheNamespace;
    const queuedAt = performance.now();
    let lease: SlotLease | undefined = await scheduler.acquire(schedulingClass, { signal });
    let held: TakenSequence | undefined;
    let keepCells = false;
    try {
      held = await pool.take(namespace, request.promptTokens);
      yield { type: "started", queuedMs: performance.now() - queuedAt, cachedTokens: held.reusedTokens };
      const text = new TextStream(detokenize, request.stop);
      const generated: Token[] = [];
      const logprobs: TokenLogprob[] = [];
      let reported = 0;
      /** The logprobs of the tokens whose text the stream has released since the last call. */
      const released = (): TokenLogprob[] | undefined => {
        if (!request.logprobs) return undefined;
        const count = text.takeReleasedTokens();
        reported += count;
        return logprobs.slice(reported - count, reported);
      };
      const options = { ...evaluateOptions(model, request.sampling, generated, grammar), evaluationPriority: EVALUATION_PRIORITY[schedulingClass] };
      const top = request.logprobs?.top ?? 0;
      const metadata = { confidence: request.logprobs !== undefined, probabilities: top > 0 };
      const jsonEnd = grammar ? new JsonEnd() : undefined;
      let reason: FinishReason | undefined;
      let input = request.promptTokens.slice(held.reusedTokens);
      while (reason === undefined) {
        input = await prefill(held.sequence, input, options.evaluationPriority, signal, lease!.preemption);
        if (signal?.aborted) {
          reason = "cancelled";
          break;
        }
        const generation = lease!.preemption.aborted ? [] : held.sequence.evaluateWithMetadata(input, metadata, options);
        for await (const next of generation) {
          const output = next as { token: Token; confidence?: number; probabilities?: Map<Token, number> };
          if (signal?.aborted) {
            reason = "cancelled";
            break;
          }
          const token = output.token;
          generated.push(token);
          if (request.logprobs) logprobs.push(tokenLogprob(model, token, output.confidence, output.probabilities, top));
          const delta = text.push(token);
          const lp = released();
          if (delta || lp?.length) yield { type: "text", text: delta, completionTokens: text.tokenCount, ...(lp ? { logprobs: lp } : {}) };
          if (text.hitStop || jsonEnd?.push(model.detokenize([token], false))) reason = "stop";
          else if (text.tokenCount >= request.maxTokens) reason = "length";
          if (reason !== undefined || lease!.preemption.aborted) break;
          await gate.wait();
        }
        if (reason !== undefined) break;
        if (!lease!.preemption.aborted) {
          reason = "stop"; // the model ended its turn
          break;
        }
        // Preempted: the cells are dropped and the slot handed over; once readmitted, the prompt and
        // the tokens generated so far are evaluated again and sampling goes on where it stopped.
        yield { type: "preempted" };
        const sequence = held.sequence;
        held = undefined;
        await pool.give(sequence, namespace, false);
        lease!.release();
        lease = undefined;
        try {
          lease = await scheduler.acquire(schedulingClass, { signal, resumed: true });
        } catch (error) {
          if (!signal?.aborted) throw error;
          reason = "cancelled";
          break;
        }
        const resumedFrom = [...request.promptTokens, ...generated];
        held = await pool.take(namespace, resumedFrom);
        input = resumedFrom.slice(held.reusedTokens);
      }
      keepCells = true;
      if (reason === "cancelled" || signal?.aborted) {
        yield { type: "finish", reason: "cancelled", completionTokens: text.tokenCount };
        return;
      }
      const rest = text.flush();
      const lp = released();
      if (rest || lp?.length) yield { type: "text", text: rest, completionTokens: text.tokenCount, ...(lp ? { logprobs: lp } : {}) };
      yield { type: "finish", reason, completionTokens: text.tokenCount };
    } finally {
      // The sequence goes back before the slot, so the request that gets the slot finds a sequence.
      if (held) await pool.give(held.sequence, namespace, keepCells);
      lease?.release();
    }
  }

  return {
    contextWindow,
    vocabularySize: vocabularySize(model),
    tokenizeChat: (messages, tools, options) => template.tokenize(messages, tools, options),
    tokenizeText(text) {
      const tokens = model.tokenize(text, true) as Token[];
      const bos = model.tokens.bos;
      return model.tokens.shouldPrependBosToken && bos !== null && tokens[0] !== bos ? [bos as Token, ...tokens] : tokens;
    },
    templateRendersTools: template.rendersTools,
    generate,
    stats: () => {
      const { idle, usedCells } = pool.stats();
      const scheduling = scheduler.stats();
      return { ...scheduling, idleSequences: idle, kvCacheUsage: usedCells / (scheduling.slots * contextWindow) };
    },
    close: async () => {
      await context.dispose();
      await model.dispose();
    },
  };
}

/** Most tokens of the completion so far that the penalties look back over. */
const PENALTY_WINDOW = 1024;

/**
 * Maps the sampling settings onto node-llama-cpp. The penalties punish the tokens generated so far
 * (not the prompt), as OpenAI's presence and frequency penalties do; repetition_penalty uses the
 * same window. A logit bias of -100 or below bans the token; any other value is added to its logit.
 */
function evaluateOptions(model: LlamaModel, sampling: SamplingSettings, generated: Token[], grammar: LlamaGrammar | undefined): SequenceEvaluateOptions {
  const options: SequenceEvaluateOptions = {
    temperature: sampling.temperature,
    topP: sampling.topP,
    topK: sampling.topK ?? 0,
    minP: sampling.minP ?? 0,
    seed: sampling.seed ?? randomInt(2 ** 31),
  };
  const { presencePenalty = 0, frequencyPenalty = 0, repetitionPenalty = 1 } = sampling;
  if (presencePenalty !== 0 || frequencyPenalty !== 0 || repetitionPenalty !== 1) {
    const repeatPenalty: LlamaContextSequenceRepeatPenalty = {
      punishTokens: () => generated.slice(-PENALTY_WINDOW),
      maxPunishTokens: PENALTY_WINDOW,
      penalty: repetitionPenalty,
      presencePenalty,
      frequencyPenalty,
    };
    options.repeatPenalty = repeatPenalty;
  }
  if (sampling.logitBias && sampling.logitBias.size > 0) {
    const bias = new TokenBias(model.tokenizer);
    for (const [token, value] of sampling.logitBias) bias.set(token as Token, value <= -100 ? "never" : { logit: value });
    options.tokenBias = bias;
  }
  if (grammar) options.grammarEvaluationState = new LlamaGrammarEvaluationState({ model, grammar });
  return options;
}

/** The most negative log probability reported (a probability of 0 would be -Infinity, which JSON cannot carry). */
const MIN_LOGPROB = -9999;

function alternative(model: LlamaModel, token: Token, probability: number): TokenAlternative {
  const text = model.detokenize([token], true);
  return { token: text, logprob: probability > 0 ? Math.max(MIN_LOGPROB, Math.log(probability)) : MIN_LOGPROB, bytes: [...Buffer.from(text, "utf8")] };
}

function tokenLogprob(model: LlamaModel, token: Token, confidence: number | undefined, probabilities: Map<Token, number> | undefined, top: number): TokenLogprob {
  const chosen = alternative(model, token, confidence ?? probabilities?.get(token) ?? 0);
  const alternatives: TokenAlternative[] = [];
  if (probabilities && top > 0) {
    for (const [candidate, probability] of probabilities) {
      if (alternatives.length >= top || !(probability > 0)) break; // the map is sorted, most likely first
      alternatives.push(alternative(model, candidate, probability));
    }
  }
  return { ...chosen, top: alternatives };
}

/** Grammars are built once per distinct constraint (a schema compiles to GBNF once). */
function grammarCache(llama: Llama) {
  const cache = new Map<string, Promise<LlamaGrammar>>();
  const MAX = 64;
  return {
    get(constraint: OutputConstraint): Promise<LlamaGrammar> {
      if (constraint.type === "json") {
        const key = "json";
        let grammar = cache.get(key);
        if (!grammar) cache.set(key, (grammar = llama.getGrammarFor("json")));
        return grammar;
      }
      const schema = normalizeJsonSchema(constraint.schema);
      const key = `schema:${JSON.stringify(schema)}`;
      let grammar = cache.get(key);
      if (!grammar) {
        grammar = llama.createGrammarForJsonSchema(schema as never) as Promise<LlamaGrammar>;
        grammar.catch(() => cache.delete(key));
        if (cache.size >= MAX) cache.delete(cache.keys().next().value!);
        cache.set(key, grammar);
      }
      return grammar;
    },
  };
}

function vocabularySize(model: LlamaModel): number {
  const tokens = model.fileInfo.metadata.tokenizer?.ggml?.tokens;
  return Array.isArray(tokens) && tokens.length > 0 ? tokens.length : 0;
}
