// What the queue has done, for /health: declared with /health's answer, which shows it as it is.
import type { EmbeddingStats } from "../../protocol/health-response.js";
import type { ServiceTier } from "../../protocol/tiers.js";
import type { EmbedReply } from "./embedding-protocol.js";
import type { Embedded } from "./embedded.js";
import { TierQueue, type Place, type Verdict } from "../tier-queue.js";

export interface QueuedInput {
  tokens: Int32Array;
  request: PendingRequest;
  index: number;
  tier: ServiceTier;
  /** Its request answers with the vectors' JSON text. */
  json: boolean;
}

interface PendingRequest {
  vectors: Float32Array[];
  /** Each vector's JSON text, when the request asked for it. */
  json?: string[];
  remaining: number;
  resolve(embedded: Embedded): void;
  reject(error: unknown): void;
  settled: boolean;
  /** Its inputs still waiting in the queue. */
  place?: Place;
}

export interface EmbeddingQueueOptions {
  batchTokens: number;
  batchSequences: number;
  maxWaiting: number;
  dimensions: number;
  /** One function per runner thread; each runs one batch at a time. */
  runners: Array<(batch: QueuedInput[]) => Promise<EmbedReply>>;
  /**
   * Whether other work on these cores is priority work (a chat model's priority streams): lower
   * tiers' inputs then start a batch at most once every LOWER_TIER_PACE_MS, so they slow a priority
   * stream by one batch now and then and are never starved. Absent: never.
   */
  giveWay?: () => boolean;
  /** The pace, if not LOWER_TIER_PACE_MS. */
  lowerTierPaceMs?: number;
  /** Lower tiers' tokens in one batch while priority work runs elsewhere, if not LOWER_TIER_BATCH_TOKENS. */
  lowerTierBatchTokens?: number;
}

/** While priority work runs elsewhere on these cores, lower tiers' batches start at most this often. */
export const LOWER_TIER_PACE_MS = 250;
/**
 * ... and hold at most this many of their tokens (one input longer than that still runs, alone):
 * a priority chat step then waits for a short batch, not a full one. A batch's time grows with its
 * tokens; 128 is a quarter of a full 512-token batch.
 */
export const LOWER_TIER_BATCH_TOKENS = 128;

/**
 * Inputs waiting for the runners, one FIFO per tier (a TierQueue: its cap counts inputs; an
 * embedding has no flex wait limit). Whenever a runner is free, its next batch is the oldest input
 * of the most demanding tier that has one, then every further input (that tier's first, then the
 * next tier's) that still fits the batch's tokens and sequences: one llama_decode serves many
 * requests, and a long input never waits behind short ones that keep arriving.
 */
export class EmbeddingQueue {
  private readonly waiting: TierQueue<QueuedInput>;
  private readonly idle: number[];
  private readonly running = new Set<Promise<void>>();
  /** When a batch with lower tiers' inputs last started (ms, performance.now). */
  private lowerStartedAt = -Infinity;
  private retry: NodeJS.Timeout | undefined;
  private counters = { embeddedInputs: 0, embeddedTokens: 0, batches: 0, decodeSeconds: 0 };
  private closed = false;

  constructor(private readonly options: EmbeddingQueueOptions) {
    this.idle = options.runners.map((_, i) => i);
    this.waiting = new TierQueue({ maxWaiting: options.maxWaiting, unit: "inputs" });
  }

  /** The inputs' unit vectors, in order (and their JSON text with `json`); QueueFullError when they would take the queue past its cap. */
  submit(inputs: readonly Int32Array[], tier: ServiceTier, signal?: AbortSignal, json = false): Promise<Embedded> {
    if (this.closed) return Promise.reject(new Error("the embedding engine is closed"));
    return new Promise((resolve, reject) => {
      const request: PendingRequest = { vectors: new Array(inputs.length), remaining: inputs.length, resolve, reject, settled: false };
      if (json) request.json = new Array(inputs.length);
      // Shortest first: the batches cut from a long request then hold inputs of like lengths, which
      // ONNX Runtime's runner pads least and runs in fewest groups (256 short inputs: 12 runs padded
      // 0.7%, against 21 padded 8.7% in the order sent). Each vector still goes back to its own index.
      const queued = inputs.map((tokens, index) => ({ tokens, request, index, tier, json }));
      queued.sort((a, b) => a.tokens.length - b.tokens.length);
      // A full queue throws here, and so rejects. An abort fails the request even while a batch runs its inputs.
      request.place = this.waiting.enqueue(tier, queued, { dropped: (reason) => this.fail(request, reason) });
      signal?.addEventListener("abort", () => this.fail(request, new Error("The request was aborted.")), { once: true });
      this.pump();
    });
  }

  stats(): EmbeddingStats {
    return { waitingInputs: this.waitingInputs(), ...this.counters };
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    for (const input of this.waiting.clear()) this.fail(input.request, new Error("the embedding engine is closing"));
    await Promise.all(this.running);
  }

  private waitingInputs(): number {
    return this.waiting.size;
  }

  /** Settles the request with `error` (once), and takes its inputs that still wait out of the queue. */
  private fail(request: PendingRequest, error: unknown): void {
    if (request.settled) return;
    request.settled = true;
    request.place?.withdraw();
    request.reject(error);
  }

  /** Gives every idle runner a batch while inputs wait. */
  private pump(): void {
    while (this.idle.length > 0) {
      const batch = this.nextBatch();
      if (batch.length === 0) {
        this.pumpLater();
        return;
      }
      const runner = this.idle.pop()!;
      const run: Promise<void> = this.options.runners[runner]!(batch)
        .then(
          (reply) => this.deliver(batch, reply),
          (error: Error) => batch.forEach((input) => this.fail(input.request, error)),
        )
        .finally(() => {
          this.running.delete(run);
          this.idle.push(runner);
          this.pump();
        });
      this.running.add(run);
    }
  }

  private pace(): number {
    return this.options.lowerTierPaceMs ?? LOWER_TIER_PACE_MS;
  }

  /** Lower tiers' inputs held back while priority work runs elsewhere: look again when their turn comes. */
  private pumpLater(): void {
    if (this.retry || this.closed || this.waitingInputs() === 0) return;
    const wait = Math.max(10, this.lowerStartedAt + this.pace() - performance.now());
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.pump();
    }, wait);
    this.retry.unref();
  }

  private nextBatch(): QueuedInput[] {
    let tokens = 0;
    let lowerTokens = 0;
    let sequences = 0;
    const givingWay = this.options.giveWay?.() === true;
    const holdLower = givingWay && performance.now() - this.lowerStartedAt < this.pace();
    const lowerCap = givingWay ? (this.options.lowerTierBatchTokens ?? LOWER_TIER_BATCH_TOKENS) : Infinity;
    const batch = this.waiting.take((input, tier): Verdict => {
      const lower = tier !== "priority";
      if ((holdLower && lower) || sequences === this.options.batchSequences) return "stop";
      const length = input.tokens.length;
      if (tokens + length > this.options.batchTokens || (lower && lowerTokens > 0 && lowerTokens + length > lowerCap)) return "leave";
      sequences++;
      tokens += length;
      if (lower) lowerTokens += length;
      return "take";
    });
    if (lowerTokens > 0) this.lowerStartedAt = performance.now();
    return batch;
  }

  private deliver(batch: QueuedInput[], reply: EmbedReply): void {
    const { dimensions } = this.options;
    this.counters.batches++;
    this.counters.decodeSeconds += reply.decodeMs / 1000;
    const text = reply.json && Buffer.from(reply.json.bytes.buffer, reply.json.bytes.byteOffset, reply.json.bytes.byteLength);
    batch.forEach((input, k) => {
      this.counters.embeddedInputs++;
      this.counters.embeddedTokens += input.tokens.length;
      const request = input.request;
      if (request.settled) return;
      request.vectors[input.index] = reply.vectors.subarray(k * dimensions, (k + 1) * dimensions);
      // ASCII bytes: latin1 makes a one-byte string of them, a copy with no decoding.
      if (request.json && text)
        request.json[input.index] = text.toString("latin1", k === 0 ? 0 : reply.json!.ends[k - 1], reply.json!.ends[k]);
      if (--request.remaining === 0) {
        request.settled = true;
        request.resolve({ vectors: request.vectors, json: request.json });
      }
    });
  }
}
