import type { BatchLimits } from "../batches/limits.js";
import { BatchRunner } from "../batches/runner.js";
import { createBatchService } from "../batches/service.js";
import { batchCapacity } from "../batches/capacity.js";
import { createLinePasses, lineCaller, redeemingLinePasses, type LinePasses, type PrincipalOf } from "../accounts/batch-line-passes.js";
import { createLineExecutor } from "../batches/line-executor.js";
import { BATCH_ENDPOINTS, type Operations } from "../api/registry.js";
import type { Authenticate } from "../http/auth.js";
import type { Drain } from "../http/drain.js";
import { createLineForwarder } from "../http/deployment-forwarding.js";
import type { DeploymentService } from "../deployments/types.js";
import type { Tracing } from "../observability/tracing.js";
import type { Settings } from "../config/settings.js";
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
  /** What a line runs: the operations the API routes run, counted by the drain as the server's requests. */
  lines: {
    operations: Operations;
    drain: Drain;
    deployments: Pick<DeploymentService, "locate">;
    tracing: Tracing | null;
    /** The largest body and deepest nesting a request may have, batch lines' too. */
    settings: Pick<Settings, "bodyLimit" | "maxJsonDepth">;
  };
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
export function startBatches(wiring: BatchesWiring) {
  const { db, registry, requestLimits, ownerId, ownerIsGone, log, limits, windowSeconds } = wiring;
  const files = createFileStore(db);
  const passes = createLinePasses(db);
  const callerOf = lineCaller(wiring.principalOf);
  const forwarder = createLineForwarder();
  // Files half-written when a server stopped (an upload cut off, a batch's results) are never listed; they go, before
  // this server takes uploads. On PGlite no other process writes files; on a shared PostgreSQL only long-abandoned ones go.
  const abandonedAfter = db.kind === "pglite" ? 0 : INCOMPLETE_FILE_SECONDS;
  void files.sweepIncomplete(abandonedAfter).then(
    (n) => n > 0 && log(`removed ${n} file(s) left half-written by a stopped server`),
    () => {},
  );
  const runner: BatchRunner = new BatchRunner({
    db,
    files,
    execute: lineExecutor(wiring, callerOf, { passes, forwarder }),
    capacity: batchCapacity(registry),
    fileBytesPerAccount: limits.fileBytesPerAccount,
    ownerId,
    ownerIsGone,
    log,
  });
  const service = createBatchService({
    db,
    endpoints: BATCH_ENDPOINTS,
    files,
    limits,
    ownerId,
    wake: () => runner.wake(),
    admitUpload: uploadAdmission(db, requestLimits),
    log,
    windowSeconds: windowSeconds ? () => windowSeconds : undefined,
  });
  return {
    api: { service, files, limits },
    /** The key lookup, with passes of lines forwarded here by other processes recognized first. */
    authenticate: (next: Authenticate): Authenticate => redeemingLinePasses(passes, callerOf, next),
    /** Batches this server (or a dead one) was running resume; their lines run on spare capacity. */
    run: () => runner.start(),
    stop: async () => {
      await runner.stop();
      await forwarder.close();
    },
  };
}

/** Lines run in this process, or, for a deployment another process runs, are sent there with a one-time pass. */
function lineExecutor(
  { lines, log }: BatchesWiring,
  callerOf: ReturnType<typeof lineCaller>,
  { passes, forwarder }: { passes: LinePasses; forwarder: ReturnType<typeof createLineForwarder> },
) {
  const tracing = lines.tracing;
  return createLineExecutor({
    operations: lines.operations,
    callerOf,
    track: (work) => lines.drain.run(work),
    locate: (caller, model) => lines.deployments.locate(caller, model),
    forward: async (ownerUrl, line, signal) => {
      const { caller } = line;
      const pass = await passes.issue({ keyId: caller.keyId, accountId: caller.accountId, batchId: caller.batchId! });
      return forwarder.send(ownerUrl, { ...line, pass }, signal);
    },
    ...(tracing ? { trace: (operation: string) => tracing.request(operation, {}) } : {}),
    bodyLimit: lines.settings.bodyLimit,
    maxJsonDepth: lines.settings.maxJsonDepth,
    log,
  });
}
