import type { FastifyInstance } from "fastify";
import type { BatchLimits } from "../batches/limits.js";
import { BatchRunner } from "../batches/runner.js";
import { createBatchService } from "../batches/service.js";
import { batchCapacity } from "../batches/capacity.js";
import { createLinePasses } from "../accounts/batch-line-passes.js";
import { BatchLineCallers, type PrincipalOf } from "../http/batch-lines.js";
import type { Principal } from "../protocol/principal.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import type { Database } from "../storage/database.js";
import { createFileStore } from "../storage/files.js";
import { requireBudgetLeft } from "../billing/budgets.js";
import type { RequestLimits } from "../limits/ports.js";
import type { Caller } from "../serving/types.js";
import { countRequest } from "../limits/count-request.js";

export interface BatchesWiring {
  db: Database;
  registry: ModelRegistry;
  /** The keys' rate limits: an upload is a request against them. */
  requestLimits: RequestLimits;
  ownerId: string;
  ownerIsGone(tx: Database, ownerId: string): Promise<boolean>;
  log(message: string): void;
  limits: BatchLimits;
  /** The key a batch was created with, as it stands when each line runs. */
  principalOf: PrincipalOf;
  /** A completion window for every batch, in seconds (tests see batches expire); unset: the one asked for. */
  windowSeconds: number | undefined;
}

/** What an upload is admitted as against the key's limits (its request-rate window; no tokens). */
const UPLOADS = "files:upload";

/** On a shared PostgreSQL, a file still incomplete this long after it was opened was left by a stopped server (an upload lasts at most the request timeout). */
const INCOMPLETE_FILE_SECONDS = 6 * 3600;

/** An upload (a file, an adapter) counts against the key's request rate (no tokens) under `subject`, and needs budget left. */
export function uploadAdmission(db: Database, requestLimits: RequestLimits, subject = UPLOADS) {
  return async (caller: Caller) => {
    await countRequest(requestLimits, caller, subject);
    await requireBudgetLeft(db, caller.keyId);
  };
}

/** The Files and Batch APIs and the runner of batch lines, wired for `switchyard serve`. */
export function startBatches({
  db,
  registry,
  requestLimits,
  ownerId,
  ownerIsGone,
  log,
  limits,
  principalOf,
  windowSeconds,
}: BatchesWiring) {
  const files = createFileStore(db);
  const lineCallers = new BatchLineCallers(principalOf, createLinePasses(db));
  let runner: BatchRunner | undefined;
  const admitUpload = uploadAdmission(db, requestLimits);
  // Files half-written when a server stopped (an upload cut off, a batch's results) are never listed; they go, before
  // this server takes uploads. On PGlite no other process writes files; on a shared PostgreSQL only long-abandoned ones go.
  const abandonedAfter = db.kind === "pglite" ? 0 : INCOMPLETE_FILE_SECONDS;
  void files.sweepIncomplete(abandonedAfter).then(
    (n) => n > 0 && log(`removed ${n} file(s) left half-written by a stopped server`),
    () => {},
  );
  const service = createBatchService({
    db,
    files,
    limits,
    ownerId,
    wake: () => runner?.wake(),
    admitUpload,
    log,
    windowSeconds: windowSeconds ? () => windowSeconds : undefined,
  });
  return {
    lineCallers,
    api: { service, files, limits, passFor: (caller: Principal) => lineCallers.passFor(caller) },
    run(app: FastifyInstance) {
      runner = new BatchRunner({
        db,
        files,
        execute: lineCallers.executor(app),
        capacity: batchCapacity(registry),
        fileBytesPerAccount: limits.fileBytesPerAccount,
        ownerId,
        ownerIsGone,
        log,
      });
      runner.start();
    },
    stop: () => runner?.stop() ?? Promise.resolve(),
  };
}
