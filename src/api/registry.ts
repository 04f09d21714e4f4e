/**
 * The one list of every endpoint declared in api/, as data: each resource's declarations (what the
 * OpenAPI document lists), where it is mounted and in which transport scope, and, given the
 * services, what runs (the endpoints the route adapter registers, or the operations that generate
 * or embed, which the batch runner runs too). Everything else that lists endpoints reads this.
 */
import type { AccountAdmin } from "../accounts/account-admin.js";
import type { AccountKeys } from "../accounts/account-keys.js";
import type { AdapterLimits, AdapterService } from "../adapters/types.js";
import type { BatchLimits } from "../batches/limits.js";
import type { BatchService } from "../batches/service.js";
import type { BatchEndpoint } from "../batches/validate.js";
import type { DeploymentService } from "../deployments/types.js";
import type { UsageReports } from "../protocol/usage.js";
import type { EmbeddingService } from "../serving/embedding-service.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import type { TokenService } from "../serving/token-service.js";
import type { ChatService } from "../serving/types.js";
import { adapterEndpoints, adapterSpecs } from "./adapters/endpoints.js";
import { adminEndpoints, adminSpecs } from "./admin/endpoints.js";
import { batchEndpoints, batchSpecs } from "./batches/endpoints.js";
import type { CompletionStore } from "./chat/completion-store.js";
import { chatOperation, chatSpec } from "./chat/operation.js";
import { completionsOperation, completionsSpec } from "./completions/operation.js";
import { deploymentEndpoints, deploymentSpecs } from "./deployments/endpoints.js";
import { embeddingsOperation, embeddingsSpec } from "./embeddings/operation.js";
import type { AdminEndpoint, Endpoint, EndpointSpec } from "./endpoint.js";
import { fileEndpoints, fileSpecs, type AccountFiles } from "./files/endpoints.js";
import { keyEndpoints, keySpecs } from "./keys/endpoints.js";
import { modelEndpoints, modelSpecs } from "./models/endpoints.js";
import type { Operation, OperationSpec } from "./operation.js";
import type { BackgroundResponses } from "./responses/background.js";
import { storedResponseEndpoints, storedResponseSpecs } from "./responses/endpoints.js";
import { responsesOperation, responsesSpec } from "./responses/operation.js";
import type { ResponseStore } from "./responses/response-store.js";
import { storedCompletionEndpoints, storedCompletionSpecs } from "./stored-completions/endpoints.js";
import { tokenEndpoints, tokenSpecs } from "./tokens/endpoints.js";
import { usageEndpoints, usageSpecs } from "./usage/endpoints.js";

/** What the operations are made from (the worker gives the chat service alone). */
export interface OperationDeps {
  chat: ChatService;
  /** `/embeddings`; absent: not served. */
  embeddings?: EmbeddingService;
  /** Responses kept with `store: true`; absent: `/responses` is not served, nor the stored ones. */
  responses?: ResponseStore;
  /** Where `background: true` responses run; absent: refused, and none streams again or cancels. */
  background?: BackgroundResponses;
  /** Chat completions kept with `store: true`; absent: `store` is accepted, nothing is kept, the stored ones are not served. */
  completions?: CompletionStore;
}

export interface EndpointDeps extends Omit<OperationDeps, "chat"> {
  /** Absent, and no `operations` given: no operation is served (a test of the other endpoints). */
  chat?: ChatService;
  registry: ModelRegistry;
  /** Absent (the worker): `/v1/usage` is not served. */
  usage?: UsageReports;
  /** Absent (the worker): `/v1/keys` is not served. */
  keys?: AccountKeys;
  /** The operations already made (the batch runner runs the same ones); absent: made here. */
  operations?: Operations;
  /** Absent: `/tokenize` and `/detokenize` are not served. */
  tokens?: TokenService;
  /** The Files and Batch APIs; absent: not served. */
  batches?: { service: BatchService; files: AccountFiles; limits: BatchLimits };
  /** Absent: `/v1/deployments` is not served. */
  deployments?: DeploymentService;
  /** Absent: `/v1/adapters` is not served. */
  adapters?: { service: AdapterService; limits: AdapterLimits };
  /** Absent: `/admin/v1` is not served. */
  admin?: { admin: AccountAdmin; usage: UsageReports };
}

/**
 * Where a resource is served: under each API prefix (`/v1/compat`, `/v1/openai`, `/v1`), there and
 * at the root too (the token endpoints, where vLLM and llama-server serve them), or at its own path.
 */
export type Mount = "prefixes" | "prefixes and root" | "own path";

/**
 * The transport scope its routes are registered in (http/scopes.ts makes each): as they are; forwarded
 * to the server process that runs the named deployment; forwarded and traced (the generations and
 * what they store); reading multipart uploads within `uploads`' bounds; behind the admin key.
 */
export type Scope = "plain" | "forwarded" | "forwarded and traced" | "uploads" | "admin";

/** A resource's uploads: each form's bounds (its largest file, and how many files, fields and parts), and how many are read at once. */
export interface UploadBounds {
  maxFileBytes: number;
  files: number;
  fields: number;
  parts: number;
  uploadsPerAccount: number;
  uploadsInFlight: number;
}

type AnyEndpoint = Endpoint | AdminEndpoint;
type Resource = { mount: Mount; scope: Scope; specs: Record<string, EndpointSpec> } & (
  | { serve(deps: EndpointDeps): AnyEndpoint[] | undefined; uploads?(deps: EndpointDeps): UploadBounds | undefined }
  | { operate(deps: OperationDeps): Operation | undefined }
);

/** An operation that generates or embeds: one declaration, served under the prefixes, forwarded and traced. */
const generation = <S extends OperationSpec>(spec: S, operate: (deps: OperationDeps) => Operation | undefined) => ({
  mount: "prefixes" as const,
  scope: "forwarded and traced" as const,
  specs: { [spec.id]: spec } as Record<string, S>,
  operate,
});

/** The table opens with the operations: what a batch line may run is read from them. */
const OPERATIONS = {
  chat: generation(chatSpec, (deps) => chatOperation(deps.chat, deps.completions)),
  completions: generation(completionsSpec, (deps) => completionsOperation(deps.chat)),
  responses: generation(responsesSpec, (deps) => deps.responses && responsesOperation(deps.chat, deps.responses, deps.background)),
  embeddings: generation(embeddingsSpec, (deps) => deps.embeddings && embeddingsOperation(deps.embeddings)),
} satisfies Record<string, Resource>;

/** Every operation's spec, in the table's order. */
export const OPERATION_SPECS: readonly OperationSpec[] = Object.values(OPERATIONS).flatMap((operation) => Object.values(operation.specs));

/** The endpoints a batch line may run (the batchable ones), by their URL, with their body schemas: handed to batches/ at start. */
export const BATCH_ENDPOINTS: readonly BatchEndpoint[] = OPERATION_SPECS.filter((spec) => spec.batchable).map((spec) => ({
  url: `/v1${spec.path}`,
  body: spec.body,
}));
const BATCHABLE_URLS = BATCH_ENDPOINTS.map((endpoint) => endpoint.url);

/**
 * The one list: each resource's mount, scope and declarations, and how what it serves is made from
 * the services (undefined: its service is absent, so it is not served), in the OpenAPI document's order.
 */
const REGISTRY = {
  ...OPERATIONS,
  tokens: {
    mount: "prefixes and root",
    scope: "forwarded",
    specs: tokenSpecs,
    serve: (deps: EndpointDeps) => deps.tokens && tokenEndpoints(deps.tokens),
  },
  storedResponses: {
    mount: "prefixes",
    scope: "forwarded and traced",
    specs: storedResponseSpecs,
    serve: (deps: EndpointDeps) => deps.responses && storedResponseEndpoints(deps.responses, deps.background),
  },
  storedCompletions: {
    mount: "prefixes",
    scope: "forwarded and traced",
    specs: storedCompletionSpecs,
    serve: (deps: EndpointDeps) => deps.completions && storedCompletionEndpoints(deps.completions),
  },
  files: {
    mount: "prefixes",
    scope: "uploads",
    specs: fileSpecs,
    serve: (deps: EndpointDeps) => deps.batches && fileEndpoints(deps.batches.service, deps.batches.files),
    // One file a form; the account's and the process's caps hold across the prefixes.
    uploads: (deps: EndpointDeps) => deps.batches && { ...deps.batches.limits, files: 1, fields: 8, parts: 10 },
  },
  batches: {
    mount: "prefixes",
    scope: "plain",
    specs: batchSpecs(BATCHABLE_URLS),
    serve: (deps: EndpointDeps) => deps.batches && batchEndpoints(deps.batches.service, BATCHABLE_URLS),
  },
  models: { mount: "prefixes", scope: "plain", specs: modelSpecs, serve: (deps: EndpointDeps) => modelEndpoints(deps.registry) },
  usage: { mount: "own path", scope: "plain", specs: usageSpecs, serve: (deps: EndpointDeps) => deps.usage && usageEndpoints(deps.usage) },
  keys: { mount: "own path", scope: "plain", specs: keySpecs, serve: (deps: EndpointDeps) => deps.keys && keyEndpoints(deps.keys) },
  deployments: {
    mount: "own path",
    scope: "plain",
    specs: deploymentSpecs,
    serve: (deps: EndpointDeps) => deps.deployments && deploymentEndpoints(deps.deployments),
  },
  adapters: {
    mount: "own path",
    scope: "uploads",
    specs: adapterSpecs,
    serve: (deps: EndpointDeps) => deps.adapters && adapterEndpoints(deps.adapters.service),
    // Up to three files a form (the PEFT pair or a GGUF LoRA), together within the adapter limit.
    uploads: (deps: EndpointDeps) =>
      deps.adapters && { ...deps.adapters.limits, maxFileBytes: deps.adapters.limits.maxBytes, files: 3, fields: 4, parts: 8 },
  },
  admin: {
    mount: "own path",
    scope: "admin",
    specs: adminSpecs,
    serve: (deps: EndpointDeps) => deps.admin && adminEndpoints(deps.admin.admin, deps.admin.usage),
  },
} satisfies Record<string, Resource>;

type ResourceName = keyof typeof REGISTRY;

/** The declarations by resource, each in the order the OpenAPI document lists it. */
export const ENDPOINT_SPECS = Object.fromEntries(
  Object.entries(REGISTRY).map(([resource, { specs }]) => [resource, Object.values(specs)]),
) as Record<ResourceName, EndpointSpec[]>;

/** The declarations of the resources served where one of `mounts` says, in the registry's order. */
export function specsMounted(...mounts: Mount[]): EndpointSpec[] {
  return Object.values(REGISTRY).flatMap((resource) => (mounts.includes(resource.mount) ? Object.values(resource.specs) : []));
}

/** The operations served, by path (`/chat/completions`, ...), in OPERATION_SPECS' order. */
export type Operations = ReadonlyMap<string, Operation>;

export function createOperations(deps: OperationDeps): Operations {
  const served = Object.values(OPERATIONS).flatMap(({ operate }) => operate(deps) ?? []);
  return new Map(served.map((operation) => [operation.path, operation]));
}

/** A resource served: where, in which scope, and what runs there. */
export type Served = { resource: ResourceName; mount: Mount; scope: Scope } & (
  { endpoints: AnyEndpoint[]; uploads?: UploadBounds } | { operations: Operation[] }
);

/** Every resource served given the services, in the registry's order; one whose service is absent is left out. */
export function servedResources(deps: EndpointDeps): Served[] {
  const { chat } = deps;
  const operations = deps.operations ?? (chat ? createOperations({ ...deps, chat }) : new Map<string, Operation>());
  return (Object.entries(REGISTRY) as Array<[ResourceName, Resource]>).flatMap(([resource, entry]): Served[] => {
    const where = { resource, mount: entry.mount, scope: entry.scope };
    if ("operate" in entry) {
      const served = Object.values(entry.specs).flatMap((spec) => operations.get(spec.path) ?? []);
      return served.length ? [{ ...where, operations: served }] : [];
    }
    const endpoints = entry.serve(deps);
    const uploads = entry.uploads?.(deps);
    return endpoints ? [{ ...where, endpoints, ...(uploads ? { uploads } : {}) }] : [];
  });
}

/** The endpoints served, by resource (the generation operations aside); a resource whose service is absent is not served. */
export type Endpoints = { [R in Exclude<ResourceName, keyof typeof OPERATIONS>]?: ReturnType<(typeof REGISTRY)[R]["serve"]> };

export function createEndpoints(deps: EndpointDeps): Endpoints {
  return Object.fromEntries(
    Object.entries(REGISTRY).flatMap(([resource, entry]) => ("serve" in entry ? [[resource, entry.serve(deps)]] : [])),
  ) as Endpoints;
}
