import type { SchedulingClass } from "../engine/types.js";
import { createEmbeddingHost, type EmbeddingHostOptions, type EmbeddingStats } from "../engine/embedding/embedding-host.js";
import { EmbeddingQueueFull } from "../engine/embedding/embedding-queue.js";
import { BackendBusy } from "./backend.js";

/** What serving needs from a sentence-embedding model (the embedded engine's embedding host). */
export interface EmbeddingBackend {
  readonly dimensions: number;
  /** Tokens one input may hold, the model's special tokens included. */
  readonly maxInputTokens: number;
  readonly vocabularySize: number;
  tokenize(text: string): Int32Array;
  /** Client-sent token ids, with the model's special tokens added where missing. */
  wrapTokens(ids: readonly number[]): Int32Array;
  /** Unit-length vectors in input order; throws BackendBusy when the queue is full. */
  embed(inputs: readonly Int32Array[], schedulingClass: SchedulingClass, signal?: AbortSignal): Promise<Float32Array[]>;
  stats(): EmbeddingStats;
  close(): Promise<void>;
}

export async function createLocalEmbeddingBackend(options: EmbeddingHostOptions): Promise<EmbeddingBackend> {
  const host = await createEmbeddingHost(options);
  return {
    dimensions: host.dimensions,
    maxInputTokens: host.maxInputTokens,
    vocabularySize: host.vocabularySize,
    tokenize: host.tokenize,
    wrapTokens: host.wrapTokens,
    async embed(inputs, schedulingClass, signal) {
      try {
        return await host.embed(inputs, schedulingClass, signal);
      } catch (error) {
        if (error instanceof EmbeddingQueueFull) throw new BackendBusy(error.message);
        throw error;
      }
    },
    stats: host.stats,
    close: host.close,
  };
}
