import type { GenerationRequest, ModelHostStats } from "../engine/types.js";
import type { ChatMessage, GenerationEvent, PauseControl, PromptOptions, Token, ToolDefinition } from "../protocol/generation.js";

/** The engine's load figures, as health and metrics read them through a backend's stats. */
export type { EngineCounters, ShardStepBudget } from "../engine/types.js";

export type { PauseControl };

/**
 * What serving needs from whatever runs a model: the embedded engine today, an OpenAI-compatible
 * upstream (vLLM, SGLang, llama-server, another Switchyard worker) tomorrow.
 */
export interface PreparedPrompt {
  tokenCount: number;
  /** The prompt's tokens, where the backend tokenizes itself (the embedded engine; an upstream engine's are unknown here). */
  tokens?: readonly Token[];
  /**
   * `tokenCount` is only a safe upper bound (an upstream engine tokenizes, not us): it sizes budget
   * reservations and limits, the context-length check is left to the engine, and the bill uses the
   * prompt tokens the engine reports (GenerationEvent `finish`).
   */
  tokenCountIsUpperBound?: boolean;
  /** The rendered prompt leaves a `<think>` block open: the output starts as reasoning. */
  opensThinking: boolean;
}

/**
 * A request's prediction (OpenAI's Predicted Outputs), ready for its generations: the text, and its
 * tokens where the backend drafts from them itself (the embedded engine); an upstream gets the text.
 */
export interface PreparedPrediction {
  text: string;
  /** The prediction's tokens, or an upper bound of them (`tokenCountIsUpperBound`, as for a prompt). */
  tokenCount: number;
  tokenCountIsUpperBound?: boolean;
  /** Plain text tokens (no BOS, no special tokens). */
  tokens?: readonly Token[];
}

/**
 * What a generation asks of any backend: the engine's request (engine/types.ts) without its prompt
 * tokens, and with the prediction as text (and its tokens where the backend drafts from them itself).
 */
export type GenerationParams = Omit<GenerationRequest, "promptTokens" | "prediction"> & {
  /** The output the caller expects: drafts come from it; the output is the same without it. */
  prediction?: PreparedPrediction;
};

/** An upstream replica as /health shows it (its URL stays private: /health needs no key). */
export interface ReplicaStatus {
  index: number;
  health: "up" | "down";
  running: number;
  maxConcurrency: number;
  /** Requests sent to it since start. */
  served: number;
}

export type BackendStats = ModelHostStats & { replicas?: ReplicaStatus[] };

export interface Backend<P extends PreparedPrompt = PreparedPrompt> {
  /** Tokens one request may hold: prompt plus completion. */
  readonly contextWindow: number;
  /** Renders the conversation with the model's chat template; throws PromptRejected if the template refuses it. */
  prepare(messages: readonly ChatMessage[], tools?: readonly ToolDefinition[], options?: PromptOptions): Promise<P>;
  /** A raw prompt with no chat template (legacy completions); `fairnessKey` as in PromptOptions. */
  prepareText(text: string, options?: Pick<PromptOptions, "fairnessKey">): Promise<P>;
  /**
   * Lower bounds on the tokens `prepare` and `prepareText` would find, cheap enough to check before
   * them (absent: the backend knows none beyond one token a message).
   */
  minimumPromptTokens?(messages: readonly ChatMessage[]): number;
  minimumTextTokens?(text: string): number;
  /**
   * A prediction's text made ready for `generate` (GenerationParams.prediction); `fairnessKey` as in
   * PromptOptions. Absent: the backend takes no prediction (it is ignored, counted as none).
   */
  preparePrediction?(text: string, options?: Pick<PromptOptions, "fairnessKey">): Promise<PreparedPrediction>;
  /** Token ids the model has (logit_bias keys must be below this). */
  readonly vocabularySize: number;
  /** Tokens back into text, and one token's text (`/detokenize`); absent where an upstream engine tokenizes. */
  detokenize?(tokens: readonly Token[]): string;
  tokenText?(token: Token): string;
  /**
   * One stream per choice of the prompt (`n` params that differ in their sampling); a backend
   * that can computes the prompt once for all of them. A refusal (queue full, wait expired,
   * constraint rejected, empty prompt) is thrown by each stream at its first read. While `pause`
   * is paused (the caller cannot deliver more output), generation holds: the embedded engine keeps
   * the sequences and skips their steps; an upstream stops reading its response (TCP backpressure).
   */
  generate(prompt: P, choices: readonly GenerationParams[], signal: AbortSignal, pause?: PauseControl): AsyncGenerator<GenerationEvent>[];
  /**
   * Loads a GGUF LoRA adapter of this model under `key`, for `generate`'s `adapter` (absent: the
   * backend serves no adapters). Throws if the engine refuses the file.
   */
  addAdapter?(key: string, path: string): Promise<void>;
  /**
   * Generations naming `key` are refused (AdapterUnloaded) from now; resolves once those running
   * under it have ended and its memory is freed.
   */
  removeAdapter?(key: string): Promise<void>;
  stats(): BackendStats;
  close(): Promise<void>;
}

/** The model's chat template refused the conversation (e.g. roles that do not alternate). */
export class PromptRejected extends Error {}

/** The prompt has no tokens and the model has no BOS token to stand for it. */
export class EmptyPrompt extends Error {}

/** The generation made no progress for the engine's stall limit and was ended (its sequence freed). */
export class GenerationStalled extends Error {}

/** The generation named an adapter the backend no longer has (deleted while the request was admitted). */
export class AdapterUnloaded extends Error {}

/** The backend's wait queue is full. */
export class BackendBusy extends Error {}

/** A flex request found no spare capacity within its wait limit. */
export class BackendWaitExpired extends Error {}

/** No replica of an upstream backend can take the request now (all down, or all failed it). */
export class BackendUnavailable extends Error {}

/** An upstream engine refused the request as invalid (its 4xx); its message, code and param are kept. */
export class UpstreamRejected extends Error {
  constructor(
    message: string,
    readonly code: string | null,
    readonly param: string | null,
  ) {
    super(message);
  }
}

/** The backend cannot constrain output this way (e.g. a JSON schema keyword its grammar lacks). */
export class ConstraintRejected extends Error {}
