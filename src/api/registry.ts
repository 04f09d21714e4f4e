/**
 * The operations this server runs, one per endpoint that generates or embeds: what each is (its
 * path, schema, errors, whether it streams) and how it runs. The HTTP routes and the batch runner
 * both call an operation's `run`; the OpenAPI document reads the specs.
 */
import type { BatchEndpoint } from "../batches/validate.js";
import type { EmbeddingService } from "../serving/embedding-service.js";
import type { ChatService } from "../serving/types.js";
import { chatOperation, chatSpec } from "./chat/operation.js";
import type { CompletionStore } from "./chat/completion-store.js";
import { completionsOperation, completionsSpec } from "./completions/operation.js";
import { embeddingsOperation, embeddingsSpec } from "./embeddings/operation.js";
import type { Operation, OperationSpec } from "./operation.js";
import { responsesOperation, responsesSpec } from "./responses/operation.js";
import type { ResponseStore } from "./responses/response-store.js";
import type { BackgroundResponses } from "./responses/background.js";

/** Every operation's spec, in the order the OpenAPI document lists them. */
export const OPERATION_SPECS: readonly OperationSpec[] = [chatSpec, completionsSpec, responsesSpec, embeddingsSpec];

/** The endpoints a batch line may run (the batchable ones), by their URL, with their body schemas: handed to batches/ at start. */
export const BATCH_ENDPOINTS: readonly BatchEndpoint[] = OPERATION_SPECS.filter((spec) => spec.batchable).map((spec) => ({
  url: `/v1${spec.path}`,
  body: spec.body,
}));

export interface OperationDeps {
  chat: ChatService;
  /** `/embeddings`; absent: not served. */
  embeddings?: EmbeddingService;
  /** Responses kept with `store: true`; absent: `/responses` is not served (the worker serves none). */
  responses?: ResponseStore;
  /** Where `background: true` responses run; absent: refused. */
  background?: BackgroundResponses;
  /** Chat completions kept with `store: true`; absent: `store` is accepted and nothing is kept. */
  completions?: CompletionStore;
}

/** The operations served, by path (`/chat/completions`, ...), in OPERATION_SPECS' order. */
export type Operations = ReadonlyMap<string, Operation>;

export function createOperations(deps: OperationDeps): Operations {
  const served: Operation[] = [chatOperation(deps.chat, deps.completions), completionsOperation(deps.chat)];
  if (deps.responses) served.push(responsesOperation(deps.chat, deps.responses, deps.background));
  if (deps.embeddings) served.push(embeddingsOperation(deps.embeddings));
  return new Map(served.map((operation) => [operation.path, operation]));
}
