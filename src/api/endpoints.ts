/**
 * Every endpoint declared in api/, as data: each resource's declarations (what the OpenAPI document
 * lists) and, given the services, the endpoints that run (what the route adapter registers).
 */
import type { AccountAdmin } from "../accounts/account-admin.js";
import type { AccountKeys } from "../accounts/account-keys.js";
import type { AdapterService } from "../adapters/types.js";
import type { DeploymentService } from "../deployments/types.js";
import type { UsageReports } from "../protocol/usage.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import type { TokenService } from "../serving/token-service.js";
import type { BatchService } from "../batches/service.js";
import { batchEndpoints, batchSpecs } from "./batches/endpoints.js";
import type { CompletionStore } from "./chat/completion-store.js";
import { adapterEndpoints, adapterSpecs } from "./adapters/endpoints.js";
import { adminEndpoints, adminSpecs } from "./admin/endpoints.js";
import { deploymentEndpoints, deploymentSpecs } from "./deployments/endpoints.js";
import type { AdminEndpoint, Endpoint, EndpointSpec } from "./endpoint.js";
import { fileEndpoints, fileSpecs, type AccountFiles } from "./files/endpoints.js";
import { keyEndpoints, keySpecs } from "./keys/endpoints.js";
import { modelEndpoints, modelSpecs } from "./models/endpoints.js";
import type { BackgroundResponses } from "./responses/background.js";
import { storedResponseEndpoints, storedResponseSpecs } from "./responses/endpoints.js";
import type { ResponseStore } from "./responses/response-store.js";
import { storedCompletionEndpoints, storedCompletionSpecs } from "./stored-completions/endpoints.js";
import { tokenEndpoints, tokenSpecs } from "./tokens/endpoints.js";
import { usageEndpoints, usageSpecs } from "./usage/endpoints.js";

export interface EndpointDeps {
  registry: ModelRegistry;
  usage: UsageReports;
  keys: AccountKeys;
  /** Absent: `/tokenize` and `/detokenize` are not served. */
  tokens?: TokenService;
  /** Absent: stored chat completions are not served. */
  completions?: CompletionStore;
  /** Stored responses (`store: true`); absent: not served. */
  responses?: ResponseStore;
  /** Where `background: true` responses run; absent: none streams again or cancels. */
  background?: BackgroundResponses;
  /** The Files and Batch APIs; absent: not served. */
  batches?: { service: BatchService; files: AccountFiles };
  /** Absent: `/v1/deployments` is not served. */
  deployments?: DeploymentService;
  /** Absent: `/v1/adapters` is not served. */
  adapters?: { service: AdapterService };
  /** Absent: `/admin/v1` is not served. */
  admin?: { admin: AccountAdmin; usage: UsageReports };
}

/**
 * Where a resource is served: under each API prefix (`/v1/compat`, `/v1/openai`, `/v1`), there and
 * at the root too (the token endpoints, where vLLM and llama-server serve them), or at its own path.
 */
export type Mount = "prefixes" | "prefixes and root" | "own path";

/**
 * The one list of resources: each one's declarations, and how its endpoints are made from the
 * services (undefined: its service is absent, so it is not served). Everything else that lists
 * endpoints reads this.
 */
const RESOURCES = {
  tokens: { mount: "prefixes and root", specs: tokenSpecs, serve: (deps: EndpointDeps) => deps.tokens && tokenEndpoints(deps.tokens) },
  storedResponses: {
    mount: "prefixes",
    specs: storedResponseSpecs,
    serve: (deps: EndpointDeps) => deps.responses && storedResponseEndpoints(deps.responses, deps.background),
  },
  storedCompletions: {
    mount: "prefixes",
    specs: storedCompletionSpecs,
    serve: (deps: EndpointDeps) => deps.completions && storedCompletionEndpoints(deps.completions),
  },
  files: {
    mount: "prefixes",
    specs: fileSpecs,
    serve: (deps: EndpointDeps) => deps.batches && fileEndpoints(deps.batches.service, deps.batches.files),
  },
  batches: { mount: "prefixes", specs: batchSpecs, serve: (deps: EndpointDeps) => deps.batches && batchEndpoints(deps.batches.service) },
  models: { mount: "prefixes", specs: modelSpecs, serve: (deps: EndpointDeps) => modelEndpoints(deps.registry) },
  usage: { mount: "own path", specs: usageSpecs, serve: (deps: EndpointDeps) => usageEndpoints(deps.usage) },
  keys: { mount: "own path", specs: keySpecs, serve: (deps: EndpointDeps) => keyEndpoints(deps.keys) },
  deployments: {
    mount: "own path",
    specs: deploymentSpecs,
    serve: (deps: EndpointDeps) => deps.deployments && deploymentEndpoints(deps.deployments),
  },
  adapters: {
    mount: "own path",
    specs: adapterSpecs,
    serve: (deps: EndpointDeps) => deps.adapters && adapterEndpoints(deps.adapters.service),
  },
  /** Behind the admin key. */
  admin: {
    mount: "own path",
    specs: adminSpecs,
    serve: (deps: EndpointDeps) => deps.admin && adminEndpoints(deps.admin.admin, deps.admin.usage),
  },
} satisfies Record<
  string,
  { mount: Mount; specs: Record<string, EndpointSpec>; serve(deps: EndpointDeps): Endpoint[] | AdminEndpoint[] | undefined }
>;

type Resource = keyof typeof RESOURCES;

/** The declarations by resource, each in the order the OpenAPI document lists it. */
export const ENDPOINT_SPECS = Object.fromEntries(
  Object.entries(RESOURCES).map(([resource, { specs }]) => [resource, Object.values(specs)]),
) as Record<Resource, EndpointSpec[]>;

/** The declarations of the resources served where one of `mounts` says, in the registry's order. */
export function specsMounted(...mounts: Mount[]): EndpointSpec[] {
  return Object.values(RESOURCES).flatMap((resource) => (mounts.includes(resource.mount) ? Object.values(resource.specs) : []));
}

/** The endpoints served, by resource; a resource whose service is absent is not served. */
export type Endpoints = { [R in Resource]?: ReturnType<(typeof RESOURCES)[R]["serve"]> };

export function createEndpoints(deps: EndpointDeps): Endpoints {
  return Object.fromEntries(Object.entries(RESOURCES).map(([resource, { serve }]) => [resource, serve(deps)])) as Endpoints;
}
