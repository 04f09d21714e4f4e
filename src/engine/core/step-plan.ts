import { addShapes, chunkShape, EMPTY_SHAPE, type StepShape } from "./cost-model.js";
import { draftShape } from "./draft-budget.js";
import type { Draft } from "./drafter.js";
import type { EngineRequest } from "./request.js";
import type { MemoryOp, NewSampler, SampleOrder, StepMessage } from "../runner/step-protocol.js";

/** One step as the scheduler planned it: the runner's message and whom each part belongs to. */
export class StepPlan {
  readonly ops: MemoryOp[] = [];
  readonly newSamplers: NewSampler[] = [];
  readonly freeSamplers: number[] = [];
  /** Requests with tokens in the batch, and how many. */
  readonly scheduled: Array<{ request: EngineRequest; count: number }> = [];
  /**
   * The step's budget (tokens or time) left out, or cut short, some request that could have
   * computed: those waited their turn (no stall).
   */
  full = false;
  /** Requests whose saved cells this step's operations restore. */
  readonly restores: EngineRequest[] = [];
  /** The request behind each sample order. */
  readonly sampled: EngineRequest[] = [];
  /** The draft each sampling request verifies this step, if any. */
  readonly drafts = new Map<EngineRequest, Draft>();
  private readonly tokens: number[] = [];
  private readonly positions: number[] = [];
  private readonly sequences: number[] = [];
  private readonly outputs: number[] = [];
  private readonly samples: SampleOrder[] = [];
  /** The LoRA adapter the step's batch runs under (0n: the base model alone). */
  adapter = 0n;
  /** Requests under another adapter (or the base) wait their turn on this shard (core/adapter-turns.ts). */
  otherAdaptersWait = false;
  /** Running requests this step's planning moved to another shard (core/adapter-moves.ts). */
  movedAway = 0;
  /** What the step's time depends on, for the shard's cost model. */
  shape: StepShape = EMPTY_SHAPE;

  get batchSize(): number {
    return this.tokens.length;
  }

  get isEmpty(): boolean {
    return this.tokens.length === 0 && this.ops.length === 0 && this.newSamplers.length === 0 && this.freeSamplers.length === 0;
  }

  /**
   * Adds `count` of the request's pending tokens; if they reach its last token, it samples, and
   * verifies `draft` (tokens guessed to follow, each with its logits) after it.
   */
  add(request: EngineRequest, count: number, draft?: Draft): void {
    const from = request.computed;
    const samples = from + count === request.tokens.length;
    const guessed = samples ? (draft?.tokens ?? []) : [];
    for (let i = 0; i < count + guessed.length; i++) {
      this.tokens.push(i < count ? request.tokens[from + i]! : guessed[i - count]!);
      this.positions.push(from + i);
      this.sequences.push(request.sequence!);
      this.outputs.push(i >= count - 1 && samples ? 1 : 0);
    }
    this.scheduled.push({ request, count });
    this.shape = addShapes(this.shape, chunkShape(from, count, samples));
    if (!samples) return;
    const index = this.tokens.length - 1 - guessed.length;
    const top = request.spec.logprobs ? request.spec.logprobs.top : -1;
    this.samples.push(guessed.length > 0 ? { sampler: request.id, index, top, draft: guessed } : { sampler: request.id, index, top });
    this.sampled.push(request);
    if (guessed.length > 0) {
      this.drafts.set(request, { source: draft!.source, tokens: guessed });
      this.shape = addShapes(this.shape, draftShape(from + count - 1, guessed.length));
    }
  }

  message(threads: number): StepMessage {
    return {
      type: "step",
      threads,
      ops: this.ops,
      newSamplers: this.newSamplers,
      freeSamplers: this.freeSamplers,
      tokens: Int32Array.from(this.tokens),
      positions: Int32Array.from(this.positions),
      sequences: Int32Array.from(this.sequences),
      outputs: Uint8Array.from(this.outputs),
      samples: this.samples,
      adapter: this.adapter,
    };
  }
}
