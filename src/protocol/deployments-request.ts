import { z } from "zod";
import { identifier } from "./identifiers.js";

export type DeploymentStatus = "initializing" | "deploying" | "running" | "stopped" | "failed" | "deleted";
export const DEPLOYMENT_STATUSES: readonly DeploymentStatus[] = ["initializing", "deploying", "running", "stopped", "failed", "deleted"];

const count = () => z.number().int().optional();

/** `POST /v1/deployments`. Types only; ranges, defaults and min ≤ max are checked in one place (deployments/settings.ts). */
export const createDeploymentBody = z.strictObject({
  // Stored and echoed: no control characters (a NUL cannot be stored in PostgreSQL text).
  model: identifier(256).min(1),
  name: identifier(256).min(1),
  min_instances: count(),
  max_instances: count(),
  max_batch_size: count(),
  /** Tokens per request, and so KV cells per sequence (null or absent: the server's window). */
  context_length: z.number().int().nullish(),
});

/** `PATCH /v1/deployments/{id}`. */
export const scaleDeploymentBody = z.strictObject({ min_instances: count(), max_instances: count() });

/** `GET /v1/deployments`. */
export const listDeploymentsQuery = z.object({ status: z.enum(DEPLOYMENT_STATUSES).optional() });
