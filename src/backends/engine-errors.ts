import { PromptTemplateError } from "../engine/chat-template.js";
import { QueueFullError, UnknownAdapterError, WaitExpiredError } from "../engine/errors.js";
import { SchemaError } from "../engine/grammar/index.js";
import { EmptyPromptError } from "../engine/prompt/empty-prompt.js";
import { StalledError } from "../engine/core/stall.js";
import {
  AdapterUnloaded,
  BackendBusy,
  BackendWaitExpired,
  ConstraintRejected,
  EmptyPrompt,
  GenerationStalled,
  PromptRejected,
} from "./backend.js";

/**
 * The engine's errors as the backend errors serving knows (serving knows nothing of the engine): the
 * one map, for the embedded engine and for the tier queue wherever it runs (the upstream gateway's
 * replica pool refuses with the same QueueFullError and WaitExpiredError).
 */
export function fromEngineError(error: unknown): unknown {
  if (error instanceof QueueFullError) return new BackendBusy(error.message);
  if (error instanceof WaitExpiredError) return new BackendWaitExpired(error.message);
  if (error instanceof SchemaError) return new ConstraintRejected(error.message);
  if (error instanceof EmptyPromptError) return new EmptyPrompt(error.message);
  if (error instanceof StalledError) return new GenerationStalled(error.message);
  if (error instanceof PromptTemplateError) return new PromptRejected(error.message);
  if (error instanceof UnknownAdapterError) return new AdapterUnloaded(error.message);
  return error;
}
