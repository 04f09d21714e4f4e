import type { PerTier, ServiceTier } from "../protocol/tiers.js";

/** A token id of the model's vocabulary. */
export type Token = number;

/** A chat message as the chat template sees it. The engine knows no wire format beyond this. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** Assistant turns that called tools (rendered through the template's `tool_calls`). */
  toolCalls?: ToolCall[];
  /** Tool turns: the call this message answers. */
  toolCallId?: string;
}

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as a JSON text. */
  arguments: string;
}

/** A function the model may call, as the chat template's `tools` variable carries it. */
export interface ToolDefinition {
  name: string;
  description?: string;
  /** JSON schema of the arguments object. */
  parameters: Record<string, unknown>;
}

/** How the chat template renders the prompt beyond the messages and tools. */
export interface PromptOptions {
  /** `false`: ask the template not to think (passed as `enable_thinking: false`). Absent: the template's default. */
  thinking?: boolean;
  /**
   * Whose prompt it is (the account), opaque to the engine: the prompt workers are shared fairly
   * between keys, so one key's huge prompts cannot hold them all.
   */
  fairnessKey?: string;
}

/**
 * The caller's hold on a generation: while `paused` (its output cannot be delivered now), the
 * requests skip their steps (the embedded engine preempts them after its grace period). Once
 * `expired` is set (the caller gave up waiting for its reader), they end with that message as a
 * timeout error. `subscribe` calls back on every change.
 */
export interface PauseControl {
  readonly paused: boolean;
  readonly expired?: string;
  subscribe(listener: () => void): () => void;
}

export interface RenderedPrompt {
  tokens: Token[];
  /** The prompt ends inside an open `<think>` block: the generation starts as reasoning. */
  opensThinking: boolean;
}

export interface SamplingSettings {
  temperature: number;
  topP: number;
  /** 0 or absent: no top-k truncation. */
  topK?: number;
  /** 0 or absent: no min-p truncation. */
  minP?: number;
  /** Undefined means a fresh random seed per request. */
  seed?: number;
  /** Subtracted once from the logit of every token already generated (OpenAI semantics). */
  presencePenalty?: number;
  /** Subtracted from a token's logit once per time it was already generated (OpenAI semantics). */
  frequencyPenalty?: number;
  /** Multiplicative (CTRL-style) penalty on tokens already generated; 1 is off. */
  repetitionPenalty?: number;
  /** Token id → value added to its logit; -100 bans the token. */
  logitBias?: ReadonlyMap<number, number>;
}

/**
 * Constrains the output to a grammar (built by src/engine/grammar): any JSON object, JSON matching
 * a (supported) schema, or a call `{"name","arguments"}` of one of the tools.
 */
export type OutputConstraint =
  { type: "json" } | { type: "json_schema"; schema: Record<string, unknown> } | { type: "tool_call"; tools: readonly ToolDefinition[] };

export interface GenerationRequest {
  promptTokens: readonly Token[];
  maxTokens: number;
  sampling: SamplingSettings;
  /** Strings that end generation; they are cut exactly and never emitted. */
  stop: readonly string[];
  /** Report each token's log probability with this many most likely alternatives (0..20). */
  logprobs?: { top: number };
  constraint?: OutputConstraint;
  /** Admission order and batch precedence (absent: default). */
  tier?: ServiceTier;
  /**
   * Cached prompt prefixes are shared only between requests of the same namespace (the account);
   * absent: nothing is reused or kept.
   */
  cacheNamespace?: string;
  /** Whose request it is (opaque): a shard shares its sequences fairly between accounts (core/fairness.ts). */
  account?: string;
  /**
   * The output the caller expects (OpenAI's Predicted Outputs), tokenized as plain text (no BOS,
   * no special tokens): the engine drafts from it, aligned to what it has generated so far, and
   * verifies the drafts in its steps. The output is the same with or without it; only its speed and
   * the prediction counts differ.
   */
  prediction?: readonly Token[];
  /**
   * The LoRA adapter to generate under (a key the host was given with `addAdapter`); absent: the base
   * model. Its cached prefixes are its own: KV computed under one adapter is never reused by another.
   */
  adapter?: string;
}

/**
 * Prediction tokens verified so far (cumulative): `accepted` matched the output, `rejected` were
 * computed and thrown away (OpenAI bills them as completion tokens). Drafts of the engine's own
 * (prompt lookup) are not counted here: they are the engine's business, not the caller's.
 */
export interface PredictionCounts {
  accepted: number;
  rejected: number;
}

/** Speculative decoding over one request's life, every draft source together (for /metrics). */
export interface SpeculationCounts {
  /** Steps in which the request carried a draft. */
  drafts: number;
  /** Draft tokens verified. */
  draftTokens: number;
  /** Draft tokens accepted. */
  acceptedTokens: number;
}

export interface TokenAlternative {
  token: string;
  logprob: number;
  bytes: number[];
}

export interface TokenLogprob extends TokenAlternative {
  top: TokenAlternative[];
}

/** `cancelled`: the caller aborted; the tokens generated until then are still reported for metering. */
export type FinishReason = "stop" | "length" | "cancelled";

export type EngineEvent =
  /** `cachedTokens`: leading prompt tokens found in the prefix cache, not evaluated again. */
  | { type: "started"; queuedMs: number; cachedTokens: number }
  /** A flex generation gave its sequence back; it resumes, recomputing its cells, once readmitted. */
  | { type: "preempted" }
  /**
   * `completionTokens`: tokens generated so far, including any whose text is still held back.
   * `logprobs` (when asked for): the tokens whose text this event completes, in order.
   */
  | { type: "text"; text: string; completionTokens: number; logprobs?: TokenLogprob[]; prediction?: PredictionCounts }
  /** Tool calls an upstream engine parsed itself (the embedded engine returns calls as text that serving parses). */
  | { type: "tool_calls"; calls: ToolCall[]; completionTokens: number }
  /**
   * `promptTokens` / `cachedTokens`: what an upstream engine's usage reports for the prompt, when the
   * backend's own count was only an upper bound; billing then uses these.
   */
  | {
      type: "finish";
      reason: FinishReason;
      completionTokens: number;
      promptTokens?: number;
      cachedTokens?: number;
      /** Present when the request carried a prediction (final counts). */
      prediction?: PredictionCounts;
      /** Present when any draft was verified for the request. */
      speculation?: SpeculationCounts;
    };

export interface ModelHostStats {
  /** Sequences over all shards: how many requests run at once. */
  slots: number;
  running: PerTier<number>;
  waiting: PerTier<number>;
  preemptions: number;
  /** Running requests whose client is not reading their stream: they hold sequences and skip steps. */
  paused?: number;
  /** Sequences holding cached prefixes, not in use. */
  idleSequences: number;
  /**
   * Priority requests wait on some shard with no lower-tier sequence left to preempt: priority's own
   * load exceeds the machine (it then waits in line; standard keeps its reserve). Embedded engine only.
   */
  prioritySaturated?: boolean;
  /** Share of all KV cells holding tokens (running or cached), 0..1. */
  kvCacheUsage: number;
  /** The embedded engine's step counters since start (absent for other backends). */
  engine?: EngineCounters;
  /** Each shard's last planned step: its time budget, tokens and predicted time (embedded engine only). */
  stepBudgets?: ShardStepBudget[];
}

export interface ShardStepBudget {
  /** The inter-token target of the most demanding tier decoding on the shard (ms); null: none decoding, no time limit. */
  budgetMs: number | null;
  /** Tokens the step carried. */
  tokens: number;
  /** The shard's cost model's prediction for that step (ms). */
  plannedMs: number;
  /** Speculative decoding on the shard since start: draft tokens verified and accepted, and their ratio (null: none verified). */
  speculation: { draftTokens: number; acceptedTokens: number; acceptanceRate: number | null };
  /** The cost model's coefficients now (ms): fixed, per sampled token, per prompt token, per 1,024 cells attended, per draft token verified. */
  costModel: readonly number[];
}

export interface EngineCounters {
  steps: number;
  batchTokens: number;
  /** Prompt tokens evaluated (a prompt's cached prefix, or a choice's copied one, is not). */
  promptTokensComputed: number;
  /** Cells of preempted requests put back from the runner's memory instead of computed again. */
  restoredCells: number;
  sampledTokens: number;
  decodeMs: number;
  sampleMs: number;
  /** From sending a step to its runner to taking its reply: decode, sampling and the messages both ways. */
  roundTripMs: number;
  /** The main thread's planning and post-processing of steps (detokenizing included), while the runner waits. */
  hostMs: number;
}
