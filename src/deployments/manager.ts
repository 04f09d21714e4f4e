/**
 * The deployments API's implementation and the loop that keeps this process's deployments
 * running. State lives in the database, so any process sharing it answers for any deployment:
 * the process that owns one (deployments.owner_id, a server_owners id) runs its instances; the
 * others list it, change its settings (the owner applies them on its next tick) and forward its
 * requests to the owner (`locate`; the owner's URL is on its server_owners row). A deployment whose owner is gone is adopted by the
 * next process to look (at start, then every tick), after its open intervals are closed and billed.
 */
import { assertBudgetCovers } from "../billing/instance-budget.js";
import { Dec, toText } from "../billing/decimal.js";
import { segmentCost } from "../billing/instance-time.js";
import type { CatalogEntry } from "../catalog/types.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import type { Database } from "../storage/database.js";
import { LocalDeployment } from "./instances.js";
import { MemoryGuard } from "./memory.js";
import { closeDeadIntervals, createInstanceMeter, type InstanceMeter } from "./metering.js";
import { checkAllowed, checkName, deployableEntry, privateEntry, resolveSettings } from "./settings.js";
import { claimDeployment, findDeployment, insertDeployment, listDeployments, liveDeployments, markDeleting, ownerUrlOf, setStatus, stopDeployments, updateSettings, type DeploymentRow } from "./store.js";
import { DEFAULT_DEPLOYMENT_LIMITS, type Deployment, type DeploymentLimits, type DeploymentService, type DeploymentSettings, type InstanceFactory, type InstanceSizer } from "./types.js";

export interface DeploymentManagerOptions {
  db: Database;
  registry: ModelRegistry;
  /** The whole catalog: a deployment may run a model this process does not serve publicly. */
  catalog: readonly CatalogEntry[];
  factory: InstanceFactory;
  /** Memory one instance takes (default: nothing to check). */
  sizer?: InstanceSizer;
  /** What instances may take: SWITCHYARD_DEPLOYMENT_MEMORY_BYTES, else the machine's available memory. */
  memory?: MemoryGuard;
  limits?: DeploymentLimits;
  /** This process's owner id, and how to tell whether another owner's process is gone. */
  owner: { id: string; isGone(tx: Database, ownerId: string): Promise<boolean> };
  log: (message: string) => void;
  /** Heartbeat, autoscaling and sync period (default 5 s). */
  tickMs?: number;
  /** Length of a billed segment of instance time (default one hour). */
  segmentMs?: number;
  /** An instance above min_instances idle this long is stopped (default 60 s). */
  idleMs?: number;
}

export interface DeploymentManager extends DeploymentService {
  /** Closes dead owners' intervals, adopts orphaned deployments, starts the loop. */
  start(): Promise<void>;
  /** Unloads this process's instances (billing them up to now) and lets the deployments go, to be adopted again. */
  close(): Promise<void>;
}

export function createDeploymentManager(options: DeploymentManagerOptions): DeploymentManager {
  const { db, registry, catalog, owner, log } = options;
  const tickMs = options.tickMs ?? 5_000;
  const segmentMs = options.segmentMs ?? 3_600_000;
  const idleMs = options.idleMs ?? 60_000;
  const meter: InstanceMeter = createInstanceMeter(db, owner.id, segmentMs);
  const limits = options.limits ?? DEFAULT_DEPLOYMENT_LIMITS;
  const sizer: InstanceSizer = options.sizer ?? (async () => 0);
  const memory = options.memory ?? new MemoryGuard(undefined);
  const local = new Map<string, LocalDeployment>();
  const context = { db, registry, meter, factory: options.factory, sizer, memory, segmentMs, log };
  let timer: NodeJS.Timeout | undefined;
  let ticking: Promise<void> | null = null;

  const view = (row: DeploymentRow): Deployment => {
    const mine = local.get(row.id);
    return {
      id: row.id,
      accountId: row.accountId,
      model: row.model,
      name: row.name,
      modelId: `${row.accountName}/${row.name}`,
      status: mine && !mine.deleting ? mine.status : row.status,
      failReason: mine && !mine.deleting ? mine.failReason : row.failReason,
      settings: mine?.settings ?? row.settings,
      instances: { running: mine ? mine.running : row.openInstances, pending: mine?.pending ?? 0 },
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
    };
  };
  const reread = async (id: string) => view((await findDeployment(db, id))!);

  const run = (row: DeploymentRow): LocalDeployment | undefined => {
    const base = catalog.find((m) => m.id === row.model);
    if (!base) {
      log(`deployment ${row.id}: its model ${row.model} is not in this server's catalog`);
      return undefined;
    }
    const deployment = new LocalDeployment(row, base, row.settings, context);
    local.set(row.id, deployment);
    void deployment.reconcile();
    return deployment;
  };

  /** Deployments another live process runs are known here, so their requests get a clear 503, not a 404. */
  const showElsewhere = (row: DeploymentRow) => {
    const base = catalog.find((m) => m.id === row.model);
    if (!base || local.has(row.id)) return;
    const modelId = `${row.accountName}/${row.name}`;
    registry.putDedicated({ entry: privateEntry(base, modelId, row.createdAt), state: "elsewhere", dedicated: { accountId: row.accountId, deploymentId: row.id, baseModel: base.id } });
  };

  /** Applies what the database says: deletions and settings changed by other processes, adoptions, the rest's whereabouts. */
  const sync = async () => {
    await closeDeadIntervals(db, owner.id, owner.isGone, segmentMs);
    for (const row of await liveDeployments(db)) {
      const mine = local.get(row.id);
      if (mine && row.ownerId === owner.id) {
        if (row.deletedAt && !mine.deleting) await removeLocal(mine);
        else if (!sameSettings(row, mine)) await mine.rescale(row.settings);
      } else if (!mine && row.ownerId !== owner.id && (row.ownerId === null || (await db.transaction((tx) => owner.isGone(tx, row.ownerId!))))) {
        if (!(await claimDeployment(db, row.id, row.ownerId, owner.id))) continue;
        if (row.deletedAt) await setStatus(db, row.id, "deleted", row.failReason);
        else run({ ...row, ownerId: owner.id });
      } else if (!mine) {
        showElsewhere(row);
      }
    }
  };

  const removeLocal = async (deployment: LocalDeployment) => {
    await deployment.delete();
    local.delete(deployment.row.id);
  };

  /**
   * Before `count` more instances are asked for: the paying key's budget for a segment of each
   * (at least one: a spent key creates nothing, even stopped), then memory for them now.
   */
  const checkRoom = async (keyId: string | null, base: CatalogEntry, settings: DeploymentSettings, count: number) => {
    if (keyId !== null) {
      const ahead = toText(Dec(segmentCost(base.pricing.dedicated_instance_hour ?? "0", segmentMs)).times(String(Math.max(1, count))));
      await assertBudgetCovers(db, keyId, ahead, `${Math.max(1, count)} instance(s) for one billed segment`);
    }
    if (count > 0) memory.check(await sizer(base, settings), count);
  };

  const tick = async () => {
    for (const id of await meter.heartbeat()) {
      const reason = "The budget of the key that pays for this deployment cannot cover another billed segment of instance time; raise it, then scale up again.";
      await stopDeployments(db, { id }, "failed", reason);
      await local.get(id)?.stopNow("failed", reason);
    }
    for (const deployment of local.values()) deployment.autoscale(idleMs);
    await sync();
  };

  return {
    async start() {
      await sync();
      timer = setInterval(() => {
        ticking ??= tick()
          .catch((error: Error) => log(`deployments: ${error.message}`))
          .finally(() => (ticking = null));
      }, tickMs);
      timer.unref();
    },

    async close() {
      clearInterval(timer);
      await ticking;
      await Promise.all([...local.values()].map((d) => d.shutdown()));
      for (const id of local.keys()) await claimDeployment(db, id, owner.id, null);
      local.clear();
    },

    async create(caller, input) {
      const base = deployableEntry(catalog, input.model);
      checkAllowed(caller.allowedModels, base.id);
      const name = checkName(input.name, caller.accountName, catalog);
      const settings = resolveSettings(undefined, input.settings, limits);
      await checkRoom(caller.keyId, base, settings, settings.minInstances);
      const status = settings.minInstances === 0 ? "stopped" : "initializing";
      const row = await insertDeployment(db, { accountId: caller.accountId, keyId: caller.keyId, model: base.id, name, status, settings, ownerId: owner.id }, limits);
      run(row);
      return view(row);
    },

    async list(caller, { status }) {
      return (await listDeployments(db, caller.accountId, status)).map(view);
    },

    async get(caller, id) {
      const row = await findDeployment(db, id, { accountId: caller.accountId });
      return row ? view(row) : null;
    },

    async scale(caller, id, changes) {
      const row = await findDeployment(db, id, { accountId: caller.accountId });
      if (!row || row.deletedAt) return null;
      const settings = resolveSettings(row.settings, changes, limits);
      const base = catalog.find((m) => m.id === row.model);
      if (base) {
        checkAllowed(caller.allowedModels, base.id);
        const more = settings.minInstances - row.openInstances;
        if (more > 0) await checkRoom(row.keyId, base, settings, more);
      }
      await updateSettings(db, row, settings, limits);
      const mine = local.get(id);
      if (mine) void mine.rescale(settings);
      return reread(id);
    },

    async remove(caller, id) {
      const row = await findDeployment(db, id, { accountId: caller.accountId });
      if (!row || row.status === "deleted") return null;
      await markDeleting(db, id);
      const mine = local.get(id);
      if (mine) await removeLocal(mine);
      else if (row.ownerId === null || (await db.transaction((tx) => owner.isGone(tx, row.ownerId!)))) await setStatus(db, id, "deleted", row.failReason);
      // Else its owner drains and unloads it on its next tick.
      return reread(id);
    },

    async stopAccount(accountId) {
      const reason = "The account was disabled; its instances were stopped. Scale it up again once the account is enabled.";
      const ids = await stopDeployments(db, { accountId }, "stopped", reason);
      // Other processes see min_instances 0 on their next tick and drain theirs.
      await Promise.all(ids.map((id) => local.get(id)?.stopNow("stopped", reason)));
    },

    async locate(caller, modelId) {
      const prefix = `${caller.accountName}/`;
      if (!modelId.startsWith(prefix)) return null;
      // Served here (a public model, or a deployment this process runs): no database round trip.
      const served = registry.get(modelId);
      if (served && served.state !== "elsewhere") return null;
      return ownerUrlOf(db, caller.accountId, modelId.slice(prefix.length), owner.id);
    },
  };
}

function sameSettings(row: DeploymentRow, deployment: LocalDeployment): boolean {
  return row.settings.minInstances === deployment.settings.minInstances && row.settings.maxInstances === deployment.settings.maxInstances;
}
