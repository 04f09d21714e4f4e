import type { WireUsage } from "../protocol/chat-response.js";
import { ExactDecimal } from "../protocol/money-json.js";
import type { Usage } from "../serving/types.js";

/** A run's usage in chat's and legacy completions' wire shape (the Responses API has its own). */
export function toWireUsage(usage: Usage): WireUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    estimated_cost: ExactDecimal.of(usage.cost),
    prompt_tokens_details: { cached_tokens: usage.cachedPromptTokens },
    completion_tokens_details: {
      reasoning_tokens: usage.reasoningTokens,
      accepted_prediction_tokens: usage.acceptedPredictionTokens,
      rejected_prediction_tokens: usage.rejectedPredictionTokens,
    },
  };
}
