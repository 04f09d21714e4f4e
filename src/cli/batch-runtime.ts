import type { FastifyInstance } from "fastify";
import type { BatchLimits } from "../batches/limits.js";
import { BatchRunner } from "../batches/runner.js";
import { createBatchService } from "../batches/service.js";
import { batchCapacity } from "../batches/capacity.js";
import { createLinePasses } from "../accounts/batch-line-passes.js";
import { BatchLineCallers, type PrincipalOf } from "../http/batch-lines.js";
import type { ApiCaller } from "../http/auth.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import type { Database } from "../storage/database.js";
import { createFileStore } from "../storage/files.js";

export interface BatchesWiring {
  db: Database;
  registry: ModelRegistry;
  ownerId: string;
  ownerIsGone(tx: Database, ownerId: string): Promise<boolean>;
  log(message: string): void;
  limits: BatchLimits;
  /** The key a batch was created with, as it stands when each line runs. */
  principalOf: PrincipalOf;
  /** A completion window for every batch, in seconds (tests see batches expire); unset: the one asked for. */
  windowSeconds: number | undefined;
}

/** The Files and Batch APIs and the runner of batch lines, wired for `switchyard serve`. */
export function startBatches({ db, registry, ownerId, ownerIsGone, log, limits, principalOf, windowSeconds }: BatchesWiring) {
  const files = createFileStore(db);
  const lineCallers = new BatchLineCallers(principalOf, createLinePasses(db));
  let runner: BatchRunner | undefined;
  const service = createBatchService({ db, files, limits, ownerId, wake: () => runner?.wake(), windowSeconds: windowSeconds ? () => windowSeconds : undefined });
  return {
    lineCallers,
    api: { service, files, limits, passFor: (caller: ApiCaller) => lineCallers.passFor(caller) },
    run(app: FastifyInstance) {
      runner = new BatchRunner({ db, files, execute: lineCallers.executor(app), capacity: batchCapacity(registry), ownerId, ownerIsGone, log });
      runner.start();
    },
    stop: () => runner?.stop() ?? Promise.resolve(),
  };
}
