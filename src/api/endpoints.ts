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

/** The declarations by resource, each in the order the OpenAPI document lists it. */
export const ENDPOINT_SPECS = {
  /** Under each API prefix, and at the root (where vLLM and llama-server serve them). */
  tokens: Object.values(tokenSpecs),
  /** Under each API prefix. */
  storedResponses: Object.values(storedResponseSpecs),
  /** Under each API prefix. */
  storedCompletions: Object.values(storedCompletionSpecs),
  /** Under each API prefix. */
  files: Object.values(fileSpecs),
  /** Under each API prefix. */
  batches: Object.values(batchSpecs),
  /** Under each API prefix. */
  models: Object.values(modelSpecs),
  usage: Object.values(usageSpecs),
  keys: Object.values(keySpecs),
  deployments: Object.values(deploymentSpecs),
  adapters: Object.values(adapterSpecs),
  /** Behind the admin key. */
  admin: Object.values(adminSpecs),
} satisfies Record<string, EndpointSpec[]>;

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

export type Endpoints = { [R in Exclude<keyof typeof ENDPOINT_SPECS, "admin">]?: Endpoint[] } & { admin?: AdminEndpoint[] };

/** The endpoints served, by resource; a resource whose service is absent is not served. */
export function createEndpoints(deps: EndpointDeps): Endpoints {
  return {
    tokens: deps.tokens && tokenEndpoints(deps.tokens),
    storedResponses: deps.responses && storedResponseEndpoints(deps.responses, deps.background),
    storedCompletions: deps.completions && storedCompletionEndpoints(deps.completions),
    files: deps.batches && fileEndpoints(deps.batches.service, deps.batches.files),
    batches: deps.batches && batchEndpoints(deps.batches.service),
    models: modelEndpoints(deps.registry),
    usage: usageEndpoints(deps.usage),
    keys: keyEndpoints(deps.keys),
    deployments: deps.deployments && deploymentEndpoints(deps.deployments),
    adapters: deps.adapters && adapterEndpoints(deps.adapters.service),
    admin: deps.admin && adminEndpoints(deps.admin.admin, deps.admin.usage),
  };
}
