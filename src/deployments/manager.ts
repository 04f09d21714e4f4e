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
import { MemoryGuard } from "./memory-guard.js";
import { closeDeadIntervals, createInstanceMeter, type InstanceMeter } from "./metering.js";
import { checkAllowed, checkName, deployableEntry, privateEntry, resolveSettings } from "./settings.js";
import {
  claimDeployment,
  findDeployment,
  insertDeployment,
  listDeployments,
  liveDeployments,
  markDeleting,
  ownerUrlOf,
  setStatus,
  stopDeployments,
  updateSettings,
  type DeploymentRow,
} from "./deployment-store.js";
import {
  DEFAULT_DEPLOYMENT_LIMITS,
  type Deployment,
  type DeploymentAccount,
  type DeploymentCaller,
  type DeploymentLimits,
  type DeploymentService,
  type DeploymentSettings,
  type InstanceFactory,
  type InstanceSizer,
} from "./types.js";

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
  return new Deployments(options);
}

/** The API's answers (create … locate) and the loop (sync, tick); `local` holds the deployments this process runs. */
class Deployments implements DeploymentManager {
  private readonly db: Database;
  private readonly catalog: readonly CatalogEntry[];
  private readonly owner: DeploymentManagerOptions["owner"];
  private readonly log: (message: string) => void;
  private readonly segmentMs: number;
  private readonly meter: InstanceMeter;
  private readonly limits: DeploymentLimits;
  private readonly sizer: InstanceSizer;
  private readonly memory: MemoryGuard;
  private readonly local = new Map<string, LocalDeployment>();
  private readonly context: ConstructorParameters<typeof LocalDeployment>[3];
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | null = null;

  constructor(private readonly options: DeploymentManagerOptions) {
    ({ db: this.db, catalog: this.catalog, owner: this.owner, log: this.log } = options);
    this.segmentMs = options.segmentMs ?? 3_600_000;
    this.meter = createInstanceMeter(this.db, this.owner.id, this.segmentMs);
    this.limits = options.limits ?? DEFAULT_DEPLOYMENT_LIMITS;
    this.sizer = options.sizer ?? (async () => 0);
    this.memory = options.memory ?? new MemoryGuard(undefined);
    const { db, meter, sizer, memory, segmentMs, log } = this;
    this.context = { db, registry: options.registry, meter, factory: options.factory, sizer, memory, segmentMs, log };
  }

  async start(): Promise<void> {
    await this.sync();
    this.timer = setInterval(() => {
      this.ticking ??= this.tick()
        .catch((error: Error) => this.log(`deployments: ${error.message}`))
        .finally(() => (this.ticking = null));
    }, this.options.tickMs ?? 5_000);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.ticking;
    await Promise.all([...this.local.values()].map((d) => d.shutdown()));
    for (const id of this.local.keys()) await claimDeployment(this.db, id, this.owner.id, null);
    this.local.clear();
  }

  async create(caller: DeploymentCaller, input: Parameters<DeploymentService["create"]>[1]): Promise<Deployment> {
    const base = deployableEntry(this.catalog, input.model);
    checkAllowed(caller.allowedModels, base);
    const name = checkName(input.name, caller.accountName, this.catalog);
    const settings = resolveSettings(undefined, input.settings, this.limits);
    await this.checkRoom(caller.keyId, base, settings, settings.minInstances);
    const status = settings.minInstances === 0 ? "stopped" : "initializing";
    const row = await insertDeployment(
      this.db,
      { accountId: caller.accountId, keyId: caller.keyId, model: base.id, name, status, settings, ownerId: this.owner.id },
      this.limits,
    );
    this.run(row);
    return this.view(row);
  }

  async list(caller: DeploymentAccount, { status }: Parameters<DeploymentService["list"]>[1]): Promise<Deployment[]> {
    return (await listDeployments(this.db, caller.accountId, status)).map((row) => this.view(row));
  }

  async get(caller: DeploymentAccount, id: string): Promise<Deployment | null> {
    const row = await findDeployment(this.db, id, { accountId: caller.accountId });
    return row ? this.view(row) : null;
  }

  async scale(caller: DeploymentCaller, id: string, changes: Parameters<DeploymentService["scale"]>[2]): Promise<Deployment | null> {
    const row = await findDeployment(this.db, id, { accountId: caller.accountId });
    if (!row || row.deletedAt) return null;
    const settings = resolveSettings(row.settings, changes, this.limits);
    const base = this.catalog.find((m) => m.id === row.model);
    if (base) {
      checkAllowed(caller.allowedModels, base);
      const more = settings.minInstances - row.openInstances;
      if (more > 0) await this.checkRoom(row.keyId, base, settings, more);
    }
    await updateSettings(this.db, row, settings, this.limits);
    const mine = this.local.get(id);
    if (mine) void mine.rescale(settings);
    return this.reread(id);
  }

  async remove(caller: DeploymentCaller, id: string): Promise<Deployment | null> {
    const row = await findDeployment(this.db, id, { accountId: caller.accountId });
    if (!row || row.status === "deleted") return null;
    await markDeleting(this.db, id);
    const mine = this.local.get(id);
    if (mine) await this.removeLocal(mine);
    else if (row.ownerId === null || (await this.ownerIsGone(row.ownerId))) await setStatus(this.db, id, "deleted", row.failReason);
    // Else its owner drains and unloads it on its next tick.
    return this.reread(id);
  }

  async stopAccount(accountId: string): Promise<void> {
    const reason = "The account was disabled; its instances were stopped. Scale it up again once the account is enabled.";
    const ids = await stopDeployments(this.db, { accountId }, "stopped", reason);
    // Other processes see min_instances 0 on their next tick and drain theirs.
    await Promise.all(ids.map((id) => this.local.get(id)?.stopNow("stopped", reason)));
  }

  async locate(caller: DeploymentAccount, modelId: string): Promise<string | null> {
    const prefix = `${caller.accountName}/`;
    if (!modelId.startsWith(prefix)) return null;
    // Served here (a public model, or a deployment this process runs): no database round trip.
    const served = this.options.registry.get(modelId);
    if (served && served.state !== "elsewhere") return null;
    return ownerUrlOf(this.db, caller.accountId, modelId.slice(prefix.length), this.owner.id);
  }

  private view(row: DeploymentRow): Deployment {
    const mine = this.local.get(row.id);
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
  }

  private async reread(id: string): Promise<Deployment> {
    return this.view((await findDeployment(this.db, id))!);
  }

  private ownerIsGone(ownerId: string): Promise<boolean> {
    return this.db.transaction((tx) => this.owner.isGone(tx, ownerId));
  }

  private run(row: DeploymentRow): LocalDeployment | undefined {
    const base = this.catalog.find((m) => m.id === row.model);
    if (!base) {
      this.log(`deployment ${row.id}: its model ${row.model} is not in this server's catalog`);
      return undefined;
    }
    const deployment = new LocalDeployment(row, base, row.settings, this.context);
    this.local.set(row.id, deployment);
    void deployment.reconcile();
    return deployment;
  }

  /** Deployments another live process runs are known here, so their requests get a clear 503, not a 404. */
  private showElsewhere(row: DeploymentRow): void {
    const base = this.catalog.find((m) => m.id === row.model);
    if (!base || this.local.has(row.id)) return;
    const modelId = `${row.accountName}/${row.name}`;
    this.options.registry.putDedicated({
      entry: privateEntry(base, modelId, row.createdAt),
      state: "elsewhere",
      dedicated: { accountId: row.accountId, deploymentId: row.id, baseModel: base.id },
    });
  }

  /** Applies what the database says: deletions and settings changed by other processes, adoptions, the rest's whereabouts. */
  private async sync(): Promise<void> {
    const ownerId = this.owner.id;
    await closeDeadIntervals(this.db, ownerId, this.owner.isGone, this.segmentMs);
    for (const row of await liveDeployments(this.db)) {
      const mine = this.local.get(row.id);
      if (mine && row.ownerId === ownerId) {
        if (row.deletedAt && !mine.deleting) await this.removeLocal(mine);
        else if (!sameSettings(row, mine)) await mine.rescale(row.settings);
      } else if (!mine && row.ownerId !== ownerId && (row.ownerId === null || (await this.ownerIsGone(row.ownerId)))) {
        if (!(await claimDeployment(this.db, row.id, row.ownerId, ownerId))) continue;
        if (row.deletedAt) await setStatus(this.db, row.id, "deleted", row.failReason);
        else this.run({ ...row, ownerId });
      } else if (!mine) {
        this.showElsewhere(row);
      }
    }
  }

  private async removeLocal(deployment: LocalDeployment): Promise<void> {
    await deployment.delete();
    this.local.delete(deployment.row.id);
  }

  /**
   * Before `count` more instances are asked for: the paying key's budget for a segment of each
   * (at least one: a spent key creates nothing, even stopped), then memory for them now.
   */
  private async checkRoom(keyId: string | null, base: CatalogEntry, settings: DeploymentSettings, count: number): Promise<void> {
    if (keyId !== null) {
      const ahead = toText(Dec(segmentCost(base.pricing.dedicated_instance_hour ?? "0", this.segmentMs)).times(String(Math.max(1, count))));
      await assertBudgetCovers(this.db, keyId, ahead, `${Math.max(1, count)} instance(s) for one billed segment`);
    }
    if (count > 0) this.memory.check(await this.sizer(base, settings), count);
  }

  private async tick(): Promise<void> {
    for (const id of await this.meter.heartbeat()) {
      const reason =
        "The budget of the key that pays for this deployment cannot cover another billed segment of instance time; raise it, then scale up again.";
      await stopDeployments(this.db, { id }, "failed", reason);
      await this.local.get(id)?.stopNow("failed", reason);
    }
    for (const deployment of this.local.values()) deployment.autoscale(this.options.idleMs ?? 60_000);
    await this.sync();
  }
}

function sameSettings(row: DeploymentRow, deployment: LocalDeployment): boolean {
  return row.settings.minInstances === deployment.settings.minInstances && row.settings.maxInstances === deployment.settings.maxInstances;
}
