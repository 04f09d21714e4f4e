import { randomInt } from "node:crypto";
import { availableParallelism } from "node:os";
import { getLlama, type Llama, type LlamaContext, type LlamaModel } from "node-llama-cpp";
import { Admission } from "./admission.js";
import { chatTemplateFor, type ChatTemplate } from "./chat-template.js";
import { TextStream } from "./text-stream.js";
import type { ChatMessage, EngineEvent, FinishReason, GenerationRequest, ModelHostStats, Token } from "./types.js";

export interface ModelHostOptions {
  modelPath: string;
  /** Sequences decoded together in one context (continuous batching across them). */
  sequences: number;
  /** Most tokens (prompt + completion) one request may hold; each sequence has a KV cache this size. */
  contextWindow: number;
  /** Jinja chat template to use when the GGUF carries none. */
  fallbackChatTemplate?: string;
  threads?: number;
  batchSize?: number;
  maxWaiting: number;
}

export interface ModelHost {
  /** Tokens one request may hold in all: prompt plus completion. */
  readonly contextWindow: number;
  tokenizeChat(messages: readonly ChatMessage[]): Token[];
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
    // llama.cpp's workers spin-wait on each other, so a worker that loses its core stalls them all:
    // node-llama-cpp's default (4 threads on this 2-core machine) ran at 0.2 tok/s. One core is
    // left to Node's event loop (HTTP, SSE, detokenizing), which costs little: on 2 cores, 1 thread
    // decoded as fast as 2 and kept going when other processes took CPU.
    threads: options.threads ?? Math.max(1, availableParallelism() - 1),
    batchSize: options.batchSize ?? 512,
  });
  return createHost(model, context, chatTemplateFor(model, options.fallbackChatTemplate), new Admission(options.sequences, options.maxWaiting), contextWindow);
}

function createHost(model: LlamaModel, context: LlamaContext, template: ChatTemplate, admission: Admission, contextWindow: number): ModelHost {
  const detokenize = (tokens: readonly Token[], lastTokens: readonly Token[]) => model.detokenize(tokens, false, lastTokens);

  async function* generate(request: GenerationRequest, signal?: AbortSignal): AsyncGenerator<EngineEvent> {
    const queuedAt = performance.now();
    const release = await admission.acquire(signal);
    const sequence = context.getSequence();
    try {
      yield { type: "started", queuedMs: performance.now() - queuedAt };
      const text = new TextStream(detokenize, request.stop);
      let reason: FinishReason = "stop";
      const tokens = sequence.evaluate([...request.promptTokens], {
        temperature: request.sampling.temperature,
        topP: request.sampling.topP,
        seed: request.sampling.seed ?? randomInt(2 ** 31),
      });
      for await (const token of tokens) {
        if (signal?.aborted) {
          reason = "cancelled";
          break;
        }
        const delta = text.push(token);
        if (delta) yield { type: "text", text: delta, completionTokens: text.tokenCount };
        if (text.hitStop) break;
        if (text.tokenCount >= request.maxTokens) {
          reason = "length";
          break;
        }
      }
      if (reason === "cancelled" || signal?.aborted) {
        yield { type: "finish", reason: "cancelled", completionTokens: text.tokenCount };
        return;
      }
      const rest = text.flush();
      if (rest) yield { type: "text", text: rest, completionTokens: text.tokenCount };
      yield { type: "finish", reason, completionTokens: text.tokenCount };
    } finally {
      await sequence.dispose();
      release();
    }
  }

  return {
    contextWindow,
    tokenizeChat: (messages) => template.tokenize(messages),
    generate,
    stats: () => {
      const { running, waiting, slots } = admission.stats;
      return { running, waiting, sequences: slots };
    },
    close: async () => {
      await context.dispose();
      await model.dispose();
    },
  };
}
