import { addShapes, chunkShape, EMPTY_SHAPE, type StepShape } from "./cost-model.js";
import type { EngineRequest } from "./request.js";
import type { MemoryOp, SampleOrder, SamplerSpec, StepMessage } from "../runner/step-protocol.js";

/** One step as the scheduler planned it: the runner's message and whom each part belongs to. */
export class StepPlan {
  readonly ops: MemoryOp[] = [];
  readonly newSamplers: Array<{ id: number; spec: SamplerSpec }> = [];
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
  private readonly tokens: number[] = [];
  private readonly positions: number[] = [];
  private readonly sequences: number[] = [];
  private readonly outputs: number[] = [];
  private readonly samples: SampleOrder[] = [];
  /** What the step's time depends on, for the shard's cost model. */
  shape: StepShape = EMPTY_SHAPE;

  get batchSize(): number {
    return this.tokens.length;
  }

  get isEmpty(): boolean {
    return this.tokens.length === 0 && this.ops.length === 0 && this.newSamplers.length === 0 && this.freeSamplers.length === 0;
  }

  /** Adds `count` of the request's pending tokens; if they reach its last token, it samples. */
  add(request: EngineRequest, count: number): void {
    const from = request.computed;
    for (let i = 0; i < count; i++) {
      this.tokens.push(request.tokens[from + i]!);
      this.positions.push(from + i);
      this.sequences.push(request.sequence!);
      this.outputs.push(0);
    }
    this.scheduled.push({ request, count });
    this.shape = addShapes(this.shape, chunkShape(from, count, from + count === request.tokens.length));
    if (from + count === request.tokens.length) {
      this.outputs[this.outputs.length - 1] = 1;
      this.samples.push({ sampler: request.id, index: this.tokens.length - 1, top: request.spec.logprobs ? request.spec.logprobs.top : -1 });
      this.sampled.push(request);
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
    };
  }
}
