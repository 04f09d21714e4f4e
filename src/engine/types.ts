import type { PerTier, ServiceTier } from "../protocol/tiers.js";
import type { OutputConstraint, SamplingSettings, Token } from "../protocol/generation.js";

// The shared vocabulary lives in protocol/generation.ts; the engine's modules import it from here.
export type {
  ChatMessage,
  PauseControl,
  PromptOptions,
  FinishReason,
  GenerationEvent,
  OutputConstraint,
  PredictionCounts,
  SamplingSettings,
  SpeculationCounts,
  Token,
  TokenAlternative,
  TokenLogprob,
  ToolCall,
  ToolDefinition,
} from "../protocol/generation.js";

export interface RenderedPrompt {
  tokens: Token[];
  /** The prompt ends inside an open `<think>` block: the generation starts as reasoning. */
  opensThinking: boolean;
}

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
  /** The runner's memory operations (prefix-cache copies, saves, restores) and new sampler chains, before each decode. */
  setupMs: number;
  decodeMs: number;
  sampleMs: number;
  /** From sending a step to its runner to taking its reply: decode, sampling and the messages both ways. */
  roundTripMs: number;
  /** The main thread's planning and post-processing of steps (detokenizing included), while the runner waits. */
  hostMs: number;
  /** Steps that ran one LoRA adapter's requests (or the base's) while another's on the same shard waited their turn. */
  adapterTurnSteps: number;
  /** Running requests moved to another shard, to keep each adapter's requests on shards of their own. */
  movedRequests: number;
}
