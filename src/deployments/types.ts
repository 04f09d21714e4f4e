/**
 * Dedicated deployments: an account's private copy of a catalog model on instances of its own.
 * This module (src/deployments) knows nothing of llama.cpp or HTTP: it receives an instance factory
 * that makes a Backend, and is driven by the routes through DeploymentService.
 */
import type { Backend } from "../backends/backend.js";
import type { CatalogEntry } from "../catalog/types.js";

export type DeploymentStatus = "initializing" | "deploying" | "running" | "stopped" | "failed" | "deleted";
export const DEPLOYMENT_STATUSES: readonly DeploymentStatus[] = ["initializing", "deploying", "running", "stopped", "failed", "deleted"];

export interface DeploymentSettings {
  minInstances: number;
  maxInstances: number;
  /** Sequences each instance decodes together. */
  maxBatchSize: number;
}

/** Bounds on settings, in one place: the API validates against them, the manager never exceeds them. */
export const DEPLOYMENT_LIMITS = {
  maxInstances: 4,
  maxBatchSize: 32,
} as const;

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

/** Who manages deployments: only ever the calling key's own account. */
export interface DeploymentCaller {
  accountId: string;
  accountName: string;
}

export interface CreateDeploymentInput {
  model: string;
  name: string;
  /** Absent fields take their defaults (deployments/settings.ts). */
  settings: Partial<DeploymentSettings>;
}

export interface DeploymentService {
  create(caller: DeploymentCaller, input: CreateDeploymentInput): Promise<Deployment>;
  list(caller: DeploymentCaller, filter: { status?: DeploymentStatus }): Promise<Deployment[]>;
  /** null for an unknown id and for another account's: the routes answer both with the same 404. */
  get(caller: DeploymentCaller, id: string): Promise<Deployment | null>;
  scale(caller: DeploymentCaller, id: string, changes: { minInstances?: number; maxInstances?: number }): Promise<Deployment | null>;
  /** Stops new requests, drains the ones in flight, unloads, and marks it deleted. */
  remove(caller: DeploymentCaller, id: string): Promise<Deployment | null>;
  /**
   * Where a request naming `modelId` must go: the URL of the other live server process that runs
   * the caller's own deployment of that id, or null when this process answers it itself (it runs
   * it, or it is a public model, or not the caller's deployment: those get this process's answer).
   */
  locate(caller: DeploymentCaller, modelId: string): Promise<string | null>;
}

/** Makes one loaded instance of a catalog model, with its own sequences and KV cells. */
export type InstanceFactory = (entry: CatalogEntry, settings: DeploymentSettings) => Promise<{ backend: Backend; systemFingerprint?: string }>;
