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

/**
 * The one list of operations: each one's spec, and how it is made from the services (undefined: its
 * service is absent, so it is not served). Everything else that lists them reads this.
 */
const OPERATIONS: ReadonlyArray<{ spec: OperationSpec; make(deps: OperationDeps): Operation | undefined }> = [
  { spec: chatSpec, make: (deps) => chatOperation(deps.chat, deps.completions) },
  { spec: completionsSpec, make: (deps) => completionsOperation(deps.chat) },
  { spec: responsesSpec, make: (deps) => deps.responses && responsesOperation(deps.chat, deps.responses, deps.background) },
  { spec: embeddingsSpec, make: (deps) => deps.embeddings && embeddingsOperation(deps.embeddings) },
];

/** Every operation's spec, in the order the OpenAPI document lists them. */
export const OPERATION_SPECS: readonly OperationSpec[] = OPERATIONS.map((operation) => operation.spec);

/** The endpoints a batch line may run (the batchable ones), by their URL, with their body schemas: handed to batches/ at start. */
export const BATCH_ENDPOINTS: readonly BatchEndpoint[] = OPERATION_SPECS.filter((spec) => spec.batchable).map((spec) => ({
  url: `/v1${spec.path}`,
  body: spec.body,
}));

/** The operations served, by path (`/chat/completions`, ...), in OPERATION_SPECS' order. */
export type Operations = ReadonlyMap<string, Operation>;

export function createOperations(deps: OperationDeps): Operations {
  const served = OPERATIONS.flatMap(({ make }) => make(deps) ?? []);
  return new Map(served.map((operation) => [operation.path, operation]));
}
