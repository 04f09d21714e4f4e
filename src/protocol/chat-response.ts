/** Wire shapes of the chat-completions responses (non-stream and stream chunks). */
import type { ExactDecimal } from "./money-json.js";
import type { ServiceTier } from "./tiers.js";

export type WireFinishReason = "stop" | "length" | "tool_calls";

export interface WireTopLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
}

export interface WireTokenLogprob extends WireTopLogprob {
  top_logprobs: WireTopLogprob[];
}

export interface WireLogprobs {
  content: WireTokenLogprob[] | null;
  refusal?: null;
}

export interface WireToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A streamed tool-call fragment: the first carries id, type and name; arguments may come in pieces. */
export interface WireToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

export interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** US dollars, written as an exact decimal JSON number. */
  estimated_cost: ExactDecimal;
  prompt_tokens_details?: { cached_tokens: number };
  /**
   * `reasoning_tokens`: the part of completion_tokens spent thinking (0 for a model that did not
   * think). `accepted_prediction_tokens` / `rejected_prediction_tokens`: a prediction's tokens that
   * matched the output, and those thrown away (billed, and counted in completion_tokens); 0 without one.
   */
  completion_tokens_details: { reasoning_tokens: number; accepted_prediction_tokens: number; rejected_prediction_tokens: number };
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  service_tier: ServiceTier;
  system_fingerprint: string;
  choices: Array<{
    index: number;
    /** `reasoning_content`: the model's thinking, present only when it thought. */
    message: { role: "assistant"; content: string | null; reasoning_content?: string; tool_calls?: WireToolCall[] };
    finish_reason: WireFinishReason;
    logprobs: WireLogprobs | null;
  }>;
  usage: WireUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  service_tier: ServiceTier;
  system_fingerprint: string;
  choices: Array<{
    index: number;
    delta: { role?: "assistant"; content?: string | null; reasoning_content?: string; tool_calls?: WireToolCallDelta[] };
    finish_reason: WireFinishReason | null;
    logprobs?: WireLogprobs | null;
  }>;
  usage?: WireUsage | null;
}
