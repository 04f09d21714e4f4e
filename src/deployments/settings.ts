/**
 * What may be deployed, and with which settings: the one place where deployment input is checked
 * and defaults are applied, for creating and for scaling alike. Also the private catalog entry a
 * deployment is served under.
 */
import type { CatalogEntry } from "../catalog/types.js";
import { InvalidRequest, ModelNotFound } from "../errors.js";
import { PRIVATE_MODEL_NAME } from "../protocol/identifiers.js";
import type { DeploymentLimits, DeploymentSettings } from "./types.js";

export const DEFAULT_MAX_BATCH_SIZE = 4;
/** The smallest context_length: room for a chat template and a short exchange. */
export const MIN_CONTEXT_LENGTH = 256;

/** A key limited to some models deploys only those: the same 404 as chat on a model outside its list. */
export function checkAllowed(allowedModels: string[] | null, base: CatalogEntry): void {
  if (allowedModels !== null && ![base.id, ...(base.aliases ?? [])].some((name) => allowedModels.includes(name)))
    throw new ModelNotFound(base.id);
}

/** The catalog model to deploy; a 400 that says why when it cannot be. */
export function deployableEntry(catalog: readonly CatalogEntry[], model: string): CatalogEntry {
  const entry = catalog.find((m) => m.id === model || (m.aliases ?? []).includes(model));
  const dedicated = catalog.filter((m) => m.dedicated === true).map((m) => m.id);
  const which = dedicated.length
    ? `Models that support them: ${dedicated.join(", ")}.`
    : "No model in this server's catalog supports them.";
  if (!entry)
    throw new InvalidRequest(`The model '${shorten(model)}' is not in this server's catalog. ${which}`, "model", "model_not_found");
  if (entry.dedicated !== true)
    throw new InvalidRequest(`The model '${model}' does not support dedicated endpoints. ${which}`, "model", "model_not_deployable");
  return entry;
}

/** The deployment's name; its private id `<account>/<name>` must not be a public model's. */
export function checkName(name: string, accountName: string, catalog: readonly CatalogEntry[]): string {
  if (!PRIVATE_MODEL_NAME.test(name)) {
    throw new InvalidRequest(
      "A deployment name is 1-64 characters: letters, digits, '.', '_' or '-', starting with a letter or digit.",
      "name",
      "invalid_value",
    );
  }
  if (catalog.some((m) => m.id === `${accountName}/${name}`)) {
    throw new InvalidRequest(`'${accountName}/${name}' is a public model's id; choose another name.`, "name", "invalid_value");
  }
  return name;
}

export interface SettingsInput {
  minInstances?: number;
  maxInstances?: number;
  maxBatchSize?: number;
  /** null: back to the server's window. */
  contextLength?: number | null;
}

/**
 * Settings after a change (or for a new deployment, from defaults: one instance, batch 4):
 * 0 ≤ min ≤ max, 1 ≤ max ≤ the server's limit, 1 ≤ batch ≤ its limit. A max below the new min
 * (or an absent max) follows the min; a min above an explicit max is a 400.
 */
export function resolveSettings(
  current: DeploymentSettings | undefined,
  changes: SettingsInput,
  limits: DeploymentLimits,
): DeploymentSettings {
  const min = changes.minInstances ?? current?.minInstances ?? 1;
  const max = changes.maxInstances ?? Math.max(current?.maxInstances ?? 1, min);
  const batch = changes.maxBatchSize ?? current?.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
  const limit = limits.maxInstances;
  integerIn(min, 0, limit, "min_instances");
  integerIn(max, 1, limit, "max_instances");
  integerIn(batch, 1, limits.maxBatchSize, "max_batch_size");
  const context = changes.contextLength !== undefined ? changes.contextLength : (current?.contextLength ?? null);
  if (context !== null) integerIn(context, MIN_CONTEXT_LENGTH, limits.maxContext, "context_length");
  if (min > max)
    throw new InvalidRequest(`min_instances (${min}) must not exceed max_instances (${max}).`, "min_instances", "invalid_value");
  return { minInstances: min, maxInstances: max, maxBatchSize: batch, contextLength: context };
}

function integerIn(value: number, low: number, high: number, param: string): void {
  if (!Number.isSafeInteger(value) || value < low || value > high) {
    throw new InvalidRequest(
      `Invalid '${param}': expected an integer from ${low} to ${high}, got ${String(value)}.`,
      param,
      "invalid_value",
    );
  }
}

/**
 * The entry a deployment is served under: its private id, the base model's file and abilities,
 * and no token prices, since its instance time is what is billed (requests report cost 0).
 */
export function privateEntry(base: CatalogEntry, modelId: string, createdAt: Date): CatalogEntry {
  // The catalog's aliases name the public model, never an account's private copy of it.
  const { pull: _pull, dedicated: _dedicated, aliases: _aliases, ...rest } = base;
  return {
    ...rest,
    id: modelId,
    created: Math.floor(createdAt.getTime() / 1000),
    pricing: {
      input: "0",
      output: "0",
      cached_input: "0",
      tiers: base.pricing.tiers,
      dedicated_instance_hour: base.pricing.dedicated_instance_hour,
    },
  };
}

function shorten(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}...` : text;
}
