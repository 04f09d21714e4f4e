import {
  AdapterUnloaded,
  BackendBusy,
  BackendUnavailable,
  BackendWaitExpired,
  ConstraintRejected,
  EmptyPrompt,
  GenerationStalled,
  PromptRejected,
  UpstreamRejected,
} from "../backends/backend.js";
import { CapacityUnavailable, InvalidRequest, RateLimited, ServiceError } from "../errors.js";

/** Which request parameters a refusal names: the prompt (`messages`, `prompt`, `input`), and the output constraint's. */
export interface RefusalParams {
  promptParam: string;
  constraintParam?: string | null;
}

/**
 * A backend's error as the API error the caller gets: the one map, for chat, legacy completions,
 * Responses, embeddings and the token endpoints alike. Anything else passes on as it is (a 500).
 */
export function apiErrorOf(error: unknown, { promptParam, constraintParam = null }: RefusalParams): unknown {
  if (error instanceof BackendBusy) return new RateLimited(`${error.message} Retry shortly.`, 1, "queue_full");
  if (error instanceof BackendWaitExpired)
    return new RateLimited(`${error.message} Retry later, or use the default tier.`, 60, "resource_unavailable");
  if (error instanceof ConstraintRejected)
    return new InvalidRequest(`Unsupported schema: ${error.message}`, constraintParam, "invalid_schema");
  if (error instanceof EmptyPrompt) return new InvalidRequest(error.message, promptParam, "empty_prompt");
  if (error instanceof PromptRejected) return new InvalidRequest(error.message, promptParam);
  if (error instanceof UpstreamRejected)
    return new InvalidRequest(error.message, error.param === "messages" ? promptParam : error.param, error.code);
  // Its adapter was deleted between the model's lookup and the engine: as if it had been looked up a moment later.
  if (error instanceof AdapterUnloaded)
    return new ServiceError(
      404,
      "invalid_request_error",
      "The model does not exist or you do not have access to it.",
      "model_not_found",
      "model",
    );
  if (error instanceof BackendUnavailable) return new CapacityUnavailable(`${error.message} Retry shortly.`, 5);
  // Mid-stream: the HTTP layer sends it as an error event.
  if (error instanceof GenerationStalled) return new ServiceError(500, "server_error", error.message, "timeout");
  return error;
}
