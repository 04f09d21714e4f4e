import { loadCatalog } from "../catalog/load.js";
import type { CatalogEntry } from "../catalog/types.js";
import { resolveDataDir } from "../config/paths.js";
import { connectionCaps, loadSettings, type Settings } from "../config/settings.js";
import { raiseFileLimit } from "../http/file-limit.js";
import type { ConnectionCaps } from "../http/connection-caps.js";
import { lookUpKey, principalOfKey } from "../accounts/principals.js";
import { cachedKeyLookup } from "../accounts/key-cache.js";
import { generateAdminToken, removeServerFile, writeServerFile } from "../accounts/local-server.js";
import { createAccountAdmin } from "../accounts/account-admin.js";
import { createAccountKeys } from "../accounts/account-keys.js";
import { createUsageReports } from "../billing/usage-reports.js";
import { createMetrics } from "../observability/metrics.js";
import { startTracing, type Tracing } from "../observability/tracing.js";
import { buildApp } from "../http/app.js";
import { createDrain } from "../http/drain.js";
import { openRequestLimits } from "../limits/open.js";
import { limitDefaultsFromEnv } from "../limits/defaults.js";
import { createModelRegistry, type ModelRegistry } from "../serving/model-registry.js";
import { openDatabase } from "../storage/open.js";
import { createInFlightLedger } from "../billing/in-flight.js";
import { reconcileDeadOwners } from "../billing/recovery.js";
import { ownerIsGone, takeOwnership, type DeadOwnersClosed, type Owner, type Ownership } from "../processes/owners.js";
import { createBackgroundStore } from "../api/responses/background-store.js";
import { createDeploymentManager } from "../deployments/manager.js";
import { localInstanceFactory, localInstanceSizer } from "./instance-factory.js";
import { MemoryGuard } from "../deployments/memory-guard.js";
import { lockDataDir, type DataDirLock } from "../config/data-dir-lock.js";
import { makePrivate } from "../config/data-dir-permissions.js";
import type { Database } from "../storage/database.js";
import { runWorker } from "./serve-worker.js";
import { startBatches } from "./batch-runtime.js";
import { startAdapterUploads } from "./serve-uploads.js";
import { edgeOptions, journaledServices, type servingServices } from "./serve-services.js";
import { loadModels, selectModels } from "./serve-models.js";
import { ensureFirstKey } from "./first-key.js";
import { processEnvironment } from "../config/environment.js";

export interface ServeFlags {
  host?: string;
  port?: string;
  dataDir?: string;
  models?: string;
  catalog?: string;
  worker?: boolean;
}

/** `switchyard serve`: the server, until a signal stops it. */
export async function serve(flags: ServeFlags): Promise<void> {
  const settings = loadSettings(flags);
  const dataDir = resolveDataDir(flags.dataDir);
  const fullCatalog = await loadCatalog({ extraCatalogPath: flags.catalog });
  const catalog = selectModels(fullCatalog, settings.models);
  // A worker keeps no database: nothing of it lives in the data dir.
  if (flags.worker) return runWorker(settings, catalog, loadModels);
  // Files an earlier version (or PGlite) left readable by others become private before anything runs.
  const madePrivate = makePrivate(dataDir);
  if (madePrivate > 0)
    process.stderr.write(`switchyard: made ${madePrivate} files and directories in ${dataDir} private to their owner (0700/0600)\n`);
  // Before anything else touches the data dir: a second server on it refuses here.
  const lock = lockDataDir(dataDir);
  try {
    await run(settings, dataDir, catalog, lock, fullCatalog);
  } catch (error) {
    removeServerFile(dataDir);
    lock.release();
    throw error;
  }
}

async function run(
  settings: Settings,
  dataDir: string,
  catalog: CatalogEntry[],
  lock: DataDirLock,
  fullCatalog: CatalogEntry[],
): Promise<void> {
  const log = (message: string) => process.stderr.write(`switchyard: ${message}\n`);
  const { db, ownership, inFlight } = await openLedger(settings, dataDir, log);
  const parts = await startParts(settings, { db, ownership, inFlight, catalog, fullCatalog, log, dataDir });
  const adminToken = settings.adminKey ?? generateAdminToken();
  const app = buildServerApp(settings, parts, await connectionCapsAtStart(settings, log), adminToken);
  const address = await app.listen({ host: settings.host, port: settings.port });
  lock.listening(address);
  // Only the address it listens on: gateways sharing the database forward its deployments' requests there.
  await ownership.advertise(address);
  writeServerFile(dataDir, { url: address, adminToken });
  process.stdout.write(`Console: ${address}/console/ (sign in with an API key)\n`);
  // Deployments this server (or a dead one) ran come back; their instances load beside the public models.
  await parts.deployments.start();
  // Batches this server (or a dead one) was running resume; their lines run on spare capacity.
  parts.batches.run();

  stopOnSignals(settings, dataDir, lock, { ...parts, app, ownership });

  // Accounts' uploaded adapters load on their base models' engines, once those have loaded.
  await parts.adapters.announce();
  await parts.adapters.start(await loadModels(catalog, parts.registry, settings));
  app.log.info(`serving ${catalog.map((m) => m.id).join(", ")} on ${address}/v1/compat`);
}

/**
 * What a dead server process left unfinished: its in-flight ledger rows (billed for what they
 * delivered), then its background responses (failed, saying why).
 */
async function closeDeadOwnersWork(db: Database, self: Owner): Promise<DeadOwnersClosed> {
  const closed = await reconcileDeadOwners(db, self);
  const failed = await createBackgroundStore(db).failOrphaned();
  if (failed > 0) process.stderr.write(`switchyard: failed ${failed} background response(s) left unfinished by a stopped server process\n`);
  return closed;
}

/** The database, this process's ownership (closing what a dead process left in flight), and a first key. */
async function openLedger(settings: Settings, dataDir: string, log: (message: string) => void) {
  const db = await openDatabase({ dataDir, url: settings.databaseUrl });
  const ownership = await takeOwnership(db, settings.databaseUrl, closeDeadOwnersWork, log);
  if (ownership.recovered.rows > 0) {
    log(
      `closed ${ownership.recovered.rows} in-flight ledger rows left by ${ownership.recovered.owners || "a"} stopped server process(es): billed what they delivered, budgets released`,
    );
  }
  const inFlight = createInFlightLedger(db, ownership.owner.id);
  await ensureFirstKey(db, dataDir);
  return { db, ownership, inFlight };
}

/** Limits, the model registry, metrics, deployments, the drain and the batch runtime: what the app is built on. */
async function startParts(
  settings: Settings,
  context: {
    db: Database;
    ownership: Ownership;
    inFlight: ServerParts["inFlight"];
    catalog: CatalogEntry[];
    fullCatalog: CatalogEntry[];
    log: (message: string) => void;
    dataDir: string;
  },
): Promise<ServerParts> {
  const { db, ownership, inFlight, catalog, fullCatalog, log, dataDir } = context;
  const limits = await openRequestLimits(processEnvironment());
  const tracing = await startTracing(processEnvironment());
  if (tracing) log("tracing: exporting spans over OTLP/HTTP (OTEL_EXPORTER_OTLP_* variables)");
  const registry = createModelRegistry(catalog);
  // Deployments' gauges would name their accounts: metrics are public.
  const metrics = createMetrics(() =>
    registry
      .list()
      // An adapter's engine is its base model's: counted once, under the base.
      .flatMap(({ entry, backend, dedicated }) =>
        backend && !dedicated && entry.adapter_of === undefined ? [{ model: entry.id, stats: backend.stats() }] : [],
      ),
  );
  const isGone = (tx: Parameters<typeof ownerIsGone>[0], ownerId: string) => ownerIsGone(tx, ownership.owner, ownerId);
  const drain = createDrain();
  const background = { ownerId: ownership.owner.id, runAsServer: drain.run.bind(drain) };
  const services = await journaledServices(settings, { db, registry, limits, inFlight, metrics, background }, dataDir, log);
  const deployments = createDeploymentManager({
    db,
    registry,
    catalog: fullCatalog,
    factory: localInstanceFactory(settings),
    sizer: localInstanceSizer(settings),
    memory: new MemoryGuard(settings.deploymentMemoryBytes),
    limits: { ...settings.deploymentLimits, maxContext: settings.maxContext },
    owner: { id: ownership.owner.id, isGone },
    log,
    ...settings.deployments,
  });
  const batches = startBatches({
    db,
    registry,
    requestLimits: limits,
    ownerId: ownership.owner.id,
    ownerIsGone: isGone,
    log,
    limits: settings.batchLimits,
    principalOf: (keyId) => principalOfKey(db, keyId),
    windowSeconds: settings.batchWindowSeconds,
    lines: { operations: services.operations, drain, deployments, tracing, settings },
  });
  const adapters = startAdapterUploads(settings, { db, registry, requestLimits: limits, dataDir, log });
  return { db, registry, limits, inFlight, metrics, tracing, deployments, adapters, drain, batches, services };
}

interface ServerParts {
  db: Database;
  registry: ModelRegistry;
  limits: Awaited<ReturnType<typeof openRequestLimits>>;
  inFlight: ReturnType<typeof createInFlightLedger>;
  metrics: ReturnType<typeof createMetrics>;
  /** Null: tracing is off (no OTLP endpoint set). */
  tracing: Tracing | null;
  deployments: ReturnType<typeof createDeploymentManager>;
  adapters: ReturnType<typeof startAdapterUploads>;
  drain: ReturnType<typeof createDrain>;
  batches: ReturnType<typeof startBatches>;
  services: ReturnType<typeof servingServices>;
}

/** Raises the soft open-file limit to the hard one and sizes the connection caps from it, saying both. */
async function connectionCapsAtStart(settings: Settings, log: (message: string) => void): Promise<ConnectionCaps> {
  const files = await raiseFileLimit();
  const caps = connectionCaps(settings, files && Number.isFinite(files.soft) ? files.soft : files ? 1 << 20 : 1024);
  const found = !files
    ? "open-file limit unknown (taken as 1024)"
    : files.raised
      ? `raised the open-file limit from ${files.before} to ${files.soft} (the hard limit)`
      : `open-file limit ${files.soft} (hard limit ${files.hard})`;
  log(
    `${found}; connections: ${caps.total} in all (${caps.reserve} kept from keys), ${caps.perKey} per key, ${caps.perAccount} per account, idle ones closed after ${caps.keepAliveTimeoutMs} ms`,
  );
  return caps;
}

function buildServerApp(
  settings: Settings,
  { db, registry, limits, metrics, tracing, deployments, adapters, drain, batches, services }: ServerParts,
  caps: ConnectionCaps,
  adminToken: string,
) {
  const edge = edgeOptions(settings);
  const usage = createUsageReports(db, services.ledger);
  return buildApp({
    drain,
    ...services,
    metrics,
    ...(tracing ? { tracing } : {}),
    registry,
    usage,
    // Per-key rate limits where a key sets none (SWITCHYARD_DEFAULT_RPM/TPM): the key API weighs rights with them.
    keys: createAccountKeys(db, limitDefaultsFromEnv(processEnvironment()), services.ledger.settled),
    limits,
    authenticate: batches.authenticate(cachedKeyLookup((token) => lookUpKey(db, token), { ttlMs: settings.keyCacheMs })),
    ...edge,
    connections: { ...edge.connections, caps },
    corsOrigins: settings.corsOrigins,
    deployments,
    adapters: { service: adapters, limits: settings.adapterLimits },
    batches: batches.api,
    admin: {
      admin: createAccountAdmin(db, {
        onAccountDisabled: (accountId) => deployments.stopAccount(accountId),
        spendSettled: services.ledger.settled,
      }),
      usage,
      adminToken,
      throttle: { maxFailures: settings.adminMaxFailures, lockoutMs: settings.adminLockoutMs },
    },
  });
}

/** On SIGINT or SIGTERM: drain, then close everything in the order that loses nothing, then exit. */
function stopOnSignals(
  settings: Settings,
  dataDir: string,
  lock: DataDirLock,
  {
    app,
    drain,
    deployments,
    adapters,
    registry,
    inFlight,
    ownership,
    limits,
    db,
    batches,
    tracing,
    services,
  }: Omit<ServerParts, "metrics"> & { app: ReturnType<typeof buildApp>; ownership: Ownership },
): void {
  const log = (message: string) => process.stderr.write(`switchyard: ${message}\n`);
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    removeServerFile(dataDir);
    // Still listening, so /health can say "draining"; new requests get 503. Running ones may finish
    // within the drain timeout; the rest end with an error (see drain.ts).
    log(`stopping: draining ${drain.inFlight} request(s) in flight for up to ${settings.drainTimeoutMs} ms`);
    const batchLines = batches.stop();
    await drain.drain(settings.drainTimeoutMs);
    await batchLines;
    // Connections that never sent a request (which clients open ahead) would otherwise hold the
    // close until their keep-alive timeout, 72 s.
    setTimeout(() => app.server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
    await app.close();
    await deployments.close();
    adapters.close();
    await registry.closeAll();
    await inFlight.drain();
    // Rows of requests already answered (an embedding's is written after its answer).
    await services.ledger.settled();
    // The spans of the last requests go out, unless the exporter is down: then the stop goes on.
    await tracing?.shutdown(TRACE_FLUSH_TIMEOUT_MS);
    await ownership.close();
    await limits.close();
    await db.close();
    lock.release();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

const SHUTDOWN_GRACE_MS = 10_000;
/** How long a stop waits for the last spans to be exported. */
const TRACE_FLUSH_TIMEOUT_MS = 5_000;
