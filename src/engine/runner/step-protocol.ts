/**
 * The messages between a shard's step loop (main thread) and its runner (a worker thread that owns
 * one llama.cpp context). One `step` message a step: memory operations, the batch, and the
 * sequences to sample; one reply with the sampled tokens.
 */

/** A request's sampler chain, built in the worker when the request first runs there. */
export interface SamplerSpec {
  /** 0: greedy. */
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  seed: number;
  presencePenalty: number;
  frequencyPenalty: number;
  repetitionPenalty: number;
  /** [token, bias]; a bias of -Infinity bans the token. */
  logitBias: Array<[number, number]>;
  /** GBNF with a `root` rule; absent: unconstrained. */
  grammar?: string;
}

/**
 * A request's sampler to build before the step. `history`: the tokens it generated before it moved
 * here from another shard, accepted into the new sampler so penalties and a grammar go on from them.
 */
export interface NewSampler {
  id: number;
  spec: SamplerSpec;
  history?: readonly number[];
}

/**
 * `rm`: drop the sequence's cells from position `from` on. `cp`: make `dst` a copy of `src`.
 * `save`: copy the sequence's cells to the runner's memory under `key` (a preempted request's);
 * `restore`: put them back into `seq` (whatever it held is replaced) and forget them; `forget`: drop
 * them unused. A restore's outcome comes back in the reply.
 */
export type MemoryOp =
  | { op: "rm"; seq: number; from: number }
  | { op: "cp"; src: number; dst: number }
  | { op: "save"; seq: number; key: number }
  | { op: "restore"; seq: number; key: number }
  | { op: "forget"; key: number };

export interface SampleOrder {
  sampler: number;
  /** Index in the batch whose logits are sampled. */
  index: number;
  /** Alternatives to report with the token's log probability; -1: no log probabilities. */
  top: number;
  /**
   * Draft tokens to verify: they follow `index` in the batch, each with its logits. The runner samples
   * at `index`, and on at each next draft position while the token it sampled equals the draft's;
   * the cells of the draft tokens after the first mismatch are removed from the sequence.
   */
  draft?: readonly number[];
}

export interface StepMessage {
  type: "step";
  /** Threads for this step's decode (up to the runner's `threads`). */
  threads: number;
  ops: MemoryOp[];
  newSamplers: NewSampler[];
  /** Freed after this step's sampling. */
  freeSamplers: number[];
  tokens: Int32Array;
  positions: Int32Array;
  sequences: Int32Array;
  /** 1 where the batch entry's logits are needed. */
  outputs: Uint8Array;
  samples: SampleOrder[];
  /** The LoRA adapter (llama.cpp handle) the decode applies; 0n: none. Set on the context only when it changes. */
  adapter: bigint;
}

/**
 * Before llama.cpp frees a LoRA adapter: the context stops applying it if it does (it would keep
 * the freed adapter's address, and a later adapter loaded there would pass for it). Answered `adapter-dropped`.
 */
export interface DropAdapterMessage {
  type: "drop-adapter";
  adapter: bigint;
}

export interface SampledLogprob {
  logprob: number;
  top: Array<[token: number, logprob: number]>;
}

export interface StepReply {
  type: "step";
  /**
   * The sampled tokens of every sample order in turn, `counts[i]` of them for order i: one, plus
   * the draft tokens it accepted (absent: one each); -1 where the request's sampler could not be built.
   */
  tokens: Int32Array;
  counts?: Uint8Array;
  /** One per token of `tokens`. */
  logprobs: Array<SampledLogprob | null>;
  /** Sampler ids whose spec llama.cpp refused (a grammar it could not parse), with the reason. */
  failedSamplers: Array<{ id: number; reason: string }>;
  /** The step's memory operations and new sampler chains, on the runner before its decode. */
  setupMs: number;
  decodeMs: number;
  sampleMs: number;
  /** Keys of this step's `restore` operations that failed (their sequence is left empty). */
  failedRestores: number[];
  /** The decode itself failed; nothing was sampled. */
  error?: string;
}

export interface RunnerInit {
  libraryDir: string;
  model: number | bigint;
  /** Sequences (one KV stream each). */
  sequences: number;
  /** Cells each sequence may hold. */
  cellsPerSequence: number;
  /** Most tokens in one step's batch. */
  batchTokens: number;
  /** The most threads a step may use (its threadpool's size). */
  threads: number;
  /** Most draft tokens one step verifies, over all its sequences (outputs beyond one per sequence). */
  draftTokens: number;
}
