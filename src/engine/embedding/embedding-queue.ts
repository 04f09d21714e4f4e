import { SERVICE_TIERS, type ServiceTier } from "../../protocol/tiers.js";
import type { EmbedReply } from "./embedding-protocol.js";

/** An embedding model's queue and what it has done, for /health. */
export interface EmbeddingStats {
  waitingInputs: number;
  embeddedInputs: number;
  embeddedTokens: number;
  batches: number;
  decodeSeconds: number;
}

/** Too many inputs wait already: the caller should retry shortly. */
export class EmbeddingQueueFull extends Error {}

export interface QueuedInput {
  tokens: Int32Array;
  request: PendingRequest;
  index: number;
}

interface PendingRequest {
  vectors: Float32Array[];
  remaining: number;
  resolve(vectors: Float32Array[]): void;
  reject(error: Error): void;
  settled: boolean;
}

export interface EmbeddingQueueOptions {
  batchTokens: number;
  batchSequences: number;
  maxWaiting: number;
  dimensions: number;
  /** One function per runner thread; each runs one batch at a time. */
  runners: Array<(batch: QueuedInput[]) => Promise<EmbedReply>>;
}

/**
 * Inputs waiting for the runners, one FIFO per tier. Whenever a runner is free, its next batch is
 * the oldest input of the most demanding tier that has one, then every further input (that tier's
 * first, then the next tier's) that still fits the batch's tokens and sequences: one llama_decode
 * serves many requests, and a long input never waits behind short ones that keep arriving.
 */
export class EmbeddingQueue {
  private readonly waiting = new Map<ServiceTier, QueuedInput[]>(SERVICE_TIERS.map((tier) => [tier, []]));
  private readonly idle: number[];
  private readonly running = new Set<Promise<void>>();
  private counters = { embeddedInputs: 0, embeddedTokens: 0, batches: 0, decodeSeconds: 0 };
  private closed = false;

  constructor(private readonly options: EmbeddingQueueOptions) {
    this.idle = options.runners.map((_, i) => i);
  }

  submit(inputs: readonly Int32Array[], tier: ServiceTier, signal?: AbortSignal): Promise<Float32Array[]> {
    if (this.closed) return Promise.reject(new Error("the embedding engine is closed"));
    if (this.waitingInputs() + inputs.length > this.options.maxWaiting) {
      return Promise.reject(new EmbeddingQueueFull(`The embedding queue is full (${this.options.maxWaiting} inputs waiting).`));
    }
    return new Promise((resolve, reject) => {
      const request: PendingRequest = { vectors: new Array(inputs.length), remaining: inputs.length, resolve, reject, settled: false };
      const queue = this.waiting.get(tier)!;
      inputs.forEach((tokens, index) => queue.push({ tokens, request, index }));
      signal?.addEventListener("abort", () => this.fail(request, new Error("The request was aborted.")), { once: true });
      this.pump();
    });
  }

  stats(): EmbeddingStats {
    return { waitingInputs: this.waitingInputs(), ...this.counters };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const queue of this.waiting.values()) queue.splice(0).forEach((input) => this.fail(input.request, new Error("the embedding engine is closing")));
    await Promise.all(this.running);
  }

  private waitingInputs(): number {
    return [...this.waiting.values()].reduce((sum, queue) => sum + queue.length, 0);
  }

  private fail(request: PendingRequest, error: Error): void {
    if (request.settled) return;
    request.settled = true;
    request.reject(error);
  }

  /** Gives every idle runner a batch while inputs wait. */
  private pump(): void {
    while (this.idle.length > 0) {
      const batch = this.nextBatch();
      if (batch.length === 0) return;
      const runner = this.idle.pop()!;
      const run: Promise<void> = this.options.runners[runner]!(batch)
        .then((reply) => this.deliver(batch, reply), (error: Error) => batch.forEach((input) => this.fail(input.request, error)))
        .finally(() => {
          this.running.delete(run);
          this.idle.push(runner);
          this.pump();
        });
      this.running.add(run);
    }
  }

  private nextBatch(): QueuedInput[] {
    const batch: QueuedInput[] = [];
    let tokens = 0;
    for (const tier of SERVICE_TIERS) {
      const queue = this.waiting.get(tier)!;
      for (let i = 0; i < queue.length && batch.length < this.options.batchSequences; ) {
        const input = queue[i]!;
        if (input.request.settled) {
          queue.splice(i, 1); // its request was aborted or failed
        } else if (tokens + input.tokens.length <= this.options.batchTokens) {
          batch.push(input);
          tokens += input.tokens.length;
          queue.splice(i, 1);
        } else i++;
      }
    }
    return batch;
  }

  private deliver(batch: QueuedInput[], reply: EmbedReply): void {
    const { dimensions } = this.options;
    this.counters.batches++;
    this.counters.decodeSeconds += reply.decodeMs / 1000;
    batch.forEach((input, k) => {
      this.counters.embeddedInputs++;
      this.counters.embeddedTokens += input.tokens.length;
      const request = input.request;
      if (request.settled) return;
      request.vectors[input.index] = normalized(reply.vectors.subarray(k * dimensions, (k + 1) * dimensions));
      if (--request.remaining === 0) {
        request.settled = true;
        request.resolve(request.vectors);
      }
    });
  }
}

/** Sentence-transformers models end in a Normalize module: unit length, so a dot product is the cosine. */
function normalized(vector: Float32Array): Float32Array {
  let sum = 0;
  for (const value of vector) sum += value * value;
  const norm = Math.sqrt(sum) || 1;
  return Float32Array.from(vector, (value) => value / norm);
}
