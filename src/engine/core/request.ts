import { EventQueue } from "./event-queue.js";
import type { GenerationEvent, GenerationRequest, Token } from "../types.js";
import type { ServiceTier } from "../../protocol/tiers.js";
import type { NewSampler, SamplerSpec } from "../runner/step-protocol.js";
import type { RequestSpeculation } from "./speculation.js";
import type { RequestOutput } from "./output.js";

export type RequestStatus = "waiting" | "running" | "finished";

let nextId = 1;

/**
 * One generation on the engine's side of the seam, as vLLM's `Request` and nano-vllm's `Sequence`:
 * everything the scheduler and the step loop know of it. There is no prefill phase: a request has
 * `tokens` (its prompt, then what it generated) and `computed`, how many of them its sequence
 * holds cells for; each step computes some of the rest, and when the last one is computed the
 * request samples its next token. Preemption (for a higher tier, or while its caller does not
 * read) gives its sequence back (its cells kept for its namespace's prefix cache) and puts it back
 * in the queue; resumption is the same catching up, from whatever of its cells are still there.
 * Only its shard's scheduler changes its state.
 */
export class EngineRequest {
  readonly id = nextId++;
  readonly tier: ServiceTier;
  readonly tokens: Token[];
  readonly promptLength: number;
  readonly arrivedAt = performance.now();
  readonly events = new EventQueue<GenerationEvent>();
  status: RequestStatus = "waiting";
  computed = 0;
  /** The shard whose scheduler owns it (set when it is queued there). */
  shard: number | undefined;
  /** Cells of it saved in the runner's memory when it was preempted (0: none). */
  savedCells = 0;
  /** Cells being restored into its sequence this step: it sits out the batch until they are back. */
  restoring = 0;
  /** Times a higher tier was admitted ahead of it while it waited (the policy's aging). */
  overtaken = 0;
  /** The sequence (KV stream) it holds while running. */
  sequence: number | undefined;
  /** Admitted at least once (its `started` event was sent). */
  started = false;
  /** Preempted: it goes back ahead of new requests of its class, and no wait limit applies. */
  resumed = false;
  /** Its sampler chain exists in its shard's runner. */
  samplerBuilt = false;
  abortRequested = false;
  /** When it was last admitted, for "latest admitted first" preemption. */
  admittedAt = 0;
  /**
   * Its caller cannot take more output now (a client not reading its stream): the scheduler leaves
   * it out of every batch, preempts it once it has been paused for the grace period (its sequence
   * goes to someone who computes), and readmits it only once it is resumed.
   */
  paused = false;
  /** When it was last paused (performance.now()): the grace period runs from here. */
  pausedAt = 0;
  /**
   * When it last advanced or waited its turn in a full batch (performance.now()); a request holding a
   * sequence longer than the stall limit past this fails (ShardScheduler.expireStalled).
   */
  progressAt = performance.now();
  /** Steps in a row its next token was left out of, giving way to a priority stream's pace. */
  yieldedSteps = 0;
  /**
   * `n` choices of one prompt: the first is the leader and carries the others, which are admitted
   * with it, wait while it computes the prompt (all but its last token) once, then copy its cells.
   */
  readonly siblings: EngineRequest[] = [];
  /** A sibling's leader, until the sibling has its copy of the prompt's cells. */
  copyFrom: EngineRequest | undefined;
  /**
   * Set to move it to another shard (core/adapter-moves.ts): its shard's scheduler hands it over at its
   * next step (never with a step of it in flight) and calls this with its output; false: the other
   * shard cannot take it (its runner died), and it stays.
   */
  moveTo: ((output: RequestOutput) => boolean) | undefined;
  /** It moved once while running: it never moves again (each move computes its tokens again). */
  moved = false;
  /** Its drafts and their outcomes (speculative decoding); absent while speculation is off. */
  speculation: RequestSpeculation | undefined;

  constructor(
    readonly spec: GenerationRequest,
    readonly sampler: SamplerSpec,
    /** The LoRA adapter its steps run under (its key and llama.cpp handle); absent: the base model. */
    readonly adapter?: { key: string; handle: bigint },
  ) {
    this.tier = spec.tier ?? "default";
    this.tokens = spec.promptTokens.slice();
    this.promptLength = spec.promptTokens.length;
  }

  get generatedCount(): number {
    return this.tokens.length - this.promptLength;
  }

  /**
   * The sampler its runner builds: one that generated tokens elsewhere (moved from another shard)
   * goes on from them, on a seed of its own (its first draws are not the old sampler's again).
   */
  samplerToBuild(): NewSampler {
    if (this.generatedCount === 0) return { id: this.id, spec: this.sampler };
    const seed = (this.sampler.seed + this.generatedCount) % 2 ** 31;
    return { id: this.id, spec: { ...this.sampler, seed }, history: this.tokens.slice(this.promptLength) };
  }

  /**
   * It gave its sequence up while running (preempted, or moved to another shard): it waits again,
   * and computes its tokens again where it is next admitted.
   */
  requeued(): void {
    this.status = "waiting";
    this.resumed = true;
    this.computed = 0;
  }

  /** Tokens still to compute before the next sample. */
  get pending(): number {
    return this.tokens.length - this.computed;
  }
}
