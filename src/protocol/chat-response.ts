/** Wire shapes of the chat-completions responses (non-stream and stream chunks). */
import type { ExactDecimal } from "../billing/money-json.js";

export type WireFinishReason = "stop" | "length";

export interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** US dollars, written as an exact decimal JSON number. */
  estimated_cost: ExactDecimal;
  prompt_tokens_details?: { cached_tokens: number };
}

export type WireServiceTier = "default" | "priority" | "flex";

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  service_tier: WireServiceTier;
  choices: Array<{
    index: number;
    message: { role: "assistant"; content: string };
    finish_reason: WireFinishReason;
    logprobs: null;
  }>;
  usage: WireUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  service_tier: WireServiceTier;
  choices: Array<{
    index: number;
    delta: { role?: "assistant"; content?: string };
    finish_reason: WireFinishReason | null;
    logprobs?: null;
  }>;
  usage?: WireUsage | null;
}
