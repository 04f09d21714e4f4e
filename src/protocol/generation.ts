/**
 * The vocabulary of a generation that every layer shares: the conversation as a chat template sees
 * it (messages, tool calls, tools), sampling, output constraints, log probabilities, and the events
 * a backend's stream yields (the embedded engine's and an upstream engine's). A leaf: it imports nothing.
 */

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

/** How the chat template renders the prompt beyond the messages and tools. */
export interface PromptOptions {
  /** `false`: ask the template not to think (passed as `enable_thinking: false`). Absent: the template's default. */
  thinking?: boolean;
  /** `false`: render the conversation without the assistant turn's opening (for counting tokens). Absent: true. */
  addGenerationPrompt?: boolean;
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

/** What a backend's generation stream yields: the embedded engine's and an upstream engine's alike. */
export type GenerationEvent =
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
