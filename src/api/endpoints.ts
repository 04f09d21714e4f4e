/**
 * Every endpoint declared in api/, as data: each resource's declarations (what the OpenAPI document
 * lists) and, given the services, the endpoints that run (what the route adapter registers).
 */
import type { AccountKeys } from "../accounts/account-keys.js";
import type { UsageReports } from "../protocol/usage.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import type { TokenService } from "../serving/token-service.js";
import type { CompletionStore } from "./chat/completion-store.js";
import type { Endpoint, EndpointSpec } from "./endpoint.js";
import { keyEndpoints, keySpecs } from "./keys/endpoints.js";
import { modelEndpoints, modelSpecs } from "./models/endpoints.js";
import { storedCompletionEndpoints, storedCompletionSpecs } from "./stored-completions/endpoints.js";
import { tokenEndpoints, tokenSpecs } from "./tokens/endpoints.js";
import { usageEndpoints, usageSpecs } from "./usage/endpoints.js";

/** The declarations by resource, each in the order the OpenAPI document lists it. */
export const ENDPOINT_SPECS = {
  /** Under each API prefix, and at the root (where vLLM and llama-server serve them). */
  tokens: Object.values(tokenSpecs),
  /** Under each API prefix. */
  storedCompletions: Object.values(storedCompletionSpecs),
  /** Under each API prefix. */
  models: Object.values(modelSpecs),
  usage: Object.values(usageSpecs),
  keys: Object.values(keySpecs),
} satisfies Record<string, EndpointSpec[]>;

export interface EndpointDeps {
  registry: ModelRegistry;
  usage: UsageReports;
  keys: AccountKeys;
  /** Absent: `/tokenize` and `/detokenize` are not served. */
  tokens?: TokenService;
  /** Absent: stored chat completions are not served. */
  completions?: CompletionStore;
}

export type Endpoints = { [R in keyof typeof ENDPOINT_SPECS]?: Endpoint[] };

/** The endpoints served, by resource; a resource whose service is absent is not served. */
export function createEndpoints(deps: EndpointDeps): Endpoints {
  return {
    tokens: deps.tokens && tokenEndpoints(deps.tokens),
    storedCompletions: deps.completions && storedCompletionEndpoints(deps.completions),
    models: modelEndpoints(deps.registry),
    usage: usageEndpoints(deps.usage),
    keys: keyEndpoints(deps.keys),
  };
}
