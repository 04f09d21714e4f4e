/**
 * Dedicated deployments: an account's private copy of a catalog model on instances of its own.
 * This module (src/deployments) knows nothing of llama.cpp or HTTP: it receives an instance factory
 * that makes a Backend, and is driven by the routes through DeploymentService.
 */
import type { Backend } from "../backends/backend.js";
import type { CatalogEntry } from "../catalog/types.js";
import type { DeploymentStatus } from "../protocol/deployments-request.js";
import type { Principal } from "../protocol/principal.js";

export { DEPLOYMENT_STATUSES, type DeploymentStatus } from "../protocol/deployments-request.js";

export interface DeploymentSettings {
  minInstances: number;
  maxInstances: number;
  /** Sequences each instance decodes together. */
  maxBatchSize: number;
  /**
   * Tokens (prompt + completion) one request may hold, so KV cells each sequence gets: the KV cache
   * is max_batch_size × this. null: the server's window, min(model's context, SWITCHYARD_MAX_CONTEXT).
   */
  contextLength: number | null;
}

/**
 * Bounds on settings and on what one account may run, in one place (the server's settings fill
 * them: SWITCHYARD_MAX_DEPLOYMENT_BATCH, SWITCHYARD_MAX_DEPLOYMENTS_PER_ACCOUNT,
 * SWITCHYARD_MAX_INSTANCES_PER_ACCOUNT): the API validates against them, the manager never exceeds them.
 */
export interface DeploymentLimits {
  /** max_instances of one deployment. */
  maxInstances: number;
  maxBatchSize: number;
  /** The largest context_length: SWITCHYARD_MAX_CONTEXT. */
  maxContext: number;
  /** Deployments an account has at once (the deleted ones aside). */
  deploymentsPerAccount: number;
  /** The sum of max_instances over an account's deployments: the most instances it can ever run. */
  instancesPerAccount: number;
}

export const DEFAULT_DEPLOYMENT_LIMITS: DeploymentLimits = {
  maxInstances: 4,
  maxBatchSize: 16,
  maxContext: 8192,
  deploymentsPerAccount: 4,
  instancesPerAccount: 4,
};

export interface Deployment {
  id: string;
  accountId: string;
  /** The catalog model it runs. */
  model: string;
  name: string;
  /** `<account name>/<name>`: what requests name as `model`. */
  modelId: string;
  status: DeploymentStatus;
  failReason: string | null;
  settings: DeploymentSettings;
  instances: { running: number; pending: number };
  createdAt: Date;
  updatedAt: Date;
}

/** Whose deployments: only ever the calling key's own account. */
export type DeploymentAccount = Pick<Principal, "accountId" | "accountName">;

/** Who creates or scales one: the key (with the manage-deployments right), its models and its budget. */
export type DeploymentCaller = Pick<Principal, "accountId" | "accountName" | "keyId" | "allowedModels">;

export interface CreateDeploymentInput {
  model: string;
  name: string;
  /** Absent fields take their defaults (deployments/settings.ts). */
  settings: Partial<DeploymentSettings>;
}

export interface DeploymentService {
  create(caller: DeploymentCaller, input: CreateDeploymentInput): Promise<Deployment>;
  list(caller: DeploymentAccount, filter: { status?: DeploymentStatus }): Promise<Deployment[]>;
  /** null for an unknown id and for another account's: the routes answer both with the same 404. */
  get(caller: DeploymentAccount, id: string): Promise<Deployment | null>;
  scale(caller: DeploymentCaller, id: string, changes: { minInstances?: number; maxInstances?: number }): Promise<Deployment | null>;
  /** Stops new requests, drains the ones in flight, unloads, and marks it deleted. */
  remove(caller: DeploymentCaller, id: string): Promise<Deployment | null>;
  /**
   * Where a request naming `modelId` must go: the URL of the other live server process that runs
   * the caller's own deployment of that id, or null when this process answers it itself (it runs
   * it, or it is a public model, or not the caller's deployment: those get this process's answer).
   */
  locate(caller: DeploymentAccount, modelId: string): Promise<string | null>;
  /** The account was disabled: its instances stop now (billed up to now) and its deployments scale to 0. */
  stopAccount(accountId: string): Promise<void>;
}

/** Makes one loaded instance of a catalog model, with its own sequences and KV cells. */
export type InstanceFactory = (
  entry: CatalogEntry,
  settings: DeploymentSettings,
) => Promise<{ backend: Backend; systemFingerprint?: string }>;

/** The memory one instance of `entry` with `settings` takes (deployments/memory-guard.ts); 0 where it takes none here (an upstream model). */
export type InstanceSizer = (entry: CatalogEntry, settings: DeploymentSettings) => Promise<number>;
