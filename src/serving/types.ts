/**
 * The request lifecycle's vocabulary, shared by the orchestrator (chat-service.ts), its steps and the
 * HTTP layer: what is asked (ChatInput), by whom (Caller), and what comes back (ChatRun, ServingEvent).
 */
import type { RateLimitState } from "../protocol/rate-limit-headers.js";
import type { RequestedTier } from "../billing/prices.js";
import type { ServiceTier } from "../protocol/tiers.js";
import type {
  ChatMessage,
  PauseControl,
  PredictionCounts,
  SpeculationCounts,
  TokenLogprob,
  ToolCall,
  ToolDefinition,
} from "../protocol/generation.js";

/** The conversation's vocabulary, as the layers above serving see it (they import nothing of the engine). */
export type { ChatMessage, PredictionCounts, SpeculationCounts, TokenLogprob, ToolCall, ToolDefinition };
import type { ApiKind } from "../protocol/request-ids.js";
import type { Caller } from "../protocol/principal.js";
import type { RequestTrace } from "./trace-port.js";

export type { Caller };
import type { ToolChoice } from "./tool-calls.js";

/**
 * What the model is asked to continue: a conversation (rendered by the model's chat template, with
 * tools and thinking), or raw texts (legacy completions: no template, no tools, no thinking), each of
 * which gets `n` choices; choice `p × n + i` is text p's i-th.
 */
export type PromptInput = { kind: "chat"; messages: ChatMessage[] } | { kind: "text"; texts: string[] };

/** Chat's names for the parameters the lifecycle's errors can name. */
export type ChatParam = "messages" | "response_format" | "response_format.json_schema.schema";

export interface ChatInput {
  model: string;
  prompt: PromptInput;
  /** Absent: up to the rest of the model's context window. */
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  repetitionPenalty?: number;
  /** Token id → logit bias (−100..100). */
  logitBias?: Map<number, number>;
  seed?: number;
  stop: string[];
  serviceTier?: RequestedTier;
  /** Choices to generate (each on its own sequence; seed + index when a seed is given). */
  n?: number;
  /** Report log probabilities, with this many alternatives per token. */
  logprobs?: { top: number };
  responseFormat?: { type: "json_object" } | { type: "json_schema"; schema: Record<string, unknown> };
  /** How the caller's API names chat's parameters, for its errors (the Responses API: `input`, `text.format`); absent: chat's names. */
  paramNames?: Partial<Record<ChatParam, string>>;
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  /** The messages carry image parts. */
  hasImages?: boolean;
  /** `none` turns the model's thinking off where its chat template can; the others leave it on. */
  reasoningEffort?: ReasoningEffort;
  /** OpenAI's `prompt_cache_key`: prompts share cached prefixes only within the account and this key. */
  promptCacheKey?: string;
  /**
   * OpenAI's Predicted Outputs: the text the caller expects back (`prediction.content`, parts
   * joined). Generation drafts from it; the output is the same with or without it.
   */
  prediction?: string;
}

/** How the HTTP layer names the request: its id (the ledger row's too) and the API it came through. */
export interface RequestContext {
  requestId?: string;
  api?: ApiKind;
  /** Held by the HTTP layer while the client is not reading its stream: generation pauses. */
  output?: PauseControl;
  /** The request's trace (the HTTP layer's span for it); absent: not traced. */
  trace?: RequestTrace;
  /**
   * Told once the request is admitted (its limits and budget reserved), before it waits for the
   * backend: a background response answers its creator then, while the generation is still queued.
   */
  onAdmitted?(admitted: { serviceTier: ServiceTier; systemFingerprint: string; rateLimits?: RateLimitState }): void;
}

export type ReasoningEffort = "none" | "minimal" | "low" | "medium" | "high";

export interface Usage {
  promptTokens: number;
  cachedPromptTokens: number;
  /**
   * The completion tokens billed: all generated tokens, reasoning included, and the rejected
   * prediction tokens (computed and thrown away; OpenAI bills them as completion tokens too).
   */
  completionTokens: number;
  /** Of the generated tokens, those the model spent thinking (inside `<think>...</think>`). */
  reasoningTokens: number;
  /** Prediction tokens that matched the output (part of the generated tokens). */
  acceptedPredictionTokens: number;
  /** Prediction tokens verified and thrown away (billed, in completionTokens, but not output). */
  rejectedPredictionTokens: number;
  /** US dollars, exact decimal string. */
  cost: string;
}

export type ChoiceFinishReason = "stop" | "length" | "tool_calls";

/** A choice's running token totals, carried by each of its events as they pass through the pipeline. */
export interface ChoiceCounts {
  completionTokens: number;
  reasoningTokens: number;
  /** The prediction tokens verified so far, when the request carried a prediction. */
  prediction?: PredictionCounts;
}

/** Output of choice `index`: made once from the engine's events (reasoning-stream.ts) and passed on as it is to the caller. */
export type OutputEvent = ChoiceCounts &
  (
    | { type: "reasoning"; index: number; text: string }
    | { type: "text"; index: number; text: string; logprobs?: TokenLogprob[] }
    | { type: "tool_calls"; index: number; calls: ToolCall[] }
  );

/** The prompt's size as an upstream engine's usage reported it (see GenerationEvent `finish`). */
export interface ReportedPrompt {
  promptTokens: number;
  cachedTokens: number;
}

/** One choice's events before metering: its output, and how it went; token counts are running totals. */
export type ChoiceEvent =
  | OutputEvent
  | (ChoiceCounts & { index: number } & (
        | { type: "preempted" }
        | {
            type: "finish";
            reason: "stop" | "length" | "cancelled" | "tool_calls";
            reported?: ReportedPrompt;
            speculation?: SpeculationCounts;
          }
      ));

/**
 * Per choice (`index`): reasoning deltas and text deltas (with the log probabilities of the tokens
 * they complete, when asked for), or tool calls, then one `finish`. After every choice has finished, exactly one
 * `done` with the usage of all of them; its reason is `cancelled` when the caller went away.
 */
export type ServingEvent =
  | OutputEvent
  | { type: "finish"; index: number; finishReason: ChoiceFinishReason }
  | { type: "done"; finishReason: "stop" | "cancelled"; usage: Usage };

export interface ChatRun {
  id: string;
  created: number;
  model: string;
  /** The tier the request is served and billed at (a tier the model lacks falls back to "default"). */
  serviceTier: ServiceTier;
  /** Stable per model file and engine configuration (see fingerprint.ts). */
  systemFingerprint: string;
  /** Text deltas, then exactly one `done` carrying the usage, even when the caller aborted. */
  events: AsyncGenerator<ServingEvent>;
  /** The key's per-minute windows right after this request was admitted (the rate-limit headers); absent without limits. */
  rateLimits?: RateLimitState;
  /** After `done`, the answer could not be delivered (not stored): the row says `failed` with this code. */
  undelivered(errorCode: string): Promise<void>;
}

export interface ChatService {
  /**
   * Checks and admits the request, and resolves once generation has started, so that every
   * rejection (unknown model, too long, over a limit or budget, queue full) reaches the caller
   * before any output. Every request, admitted or not, leaves exactly one ledger row.
   */
  start(caller: Caller, input: ChatInput, signal: AbortSignal, context?: RequestContext): Promise<ChatRun>;
}
