/**
 * One deployment this process runs: its instances (each a loaded model of its own, from the
 * factory), the pool that routes its requests, its entry in the model registry, and the metering
 * of every instance's running time. Changes (scale, autoscale, delete) run one at a time.
 */
import type { Backend } from "../backends/backend.js";
import { ServiceError } from "../errors.js";
import { BackendPool } from "../backends/instance-pool.js";
import type { CatalogEntry } from "../catalog/types.js";
import type { ModelRegistry } from "../serving/model-registry.js";
import type { Database } from "../storage/database.js";
import { holdInstanceTime, releaseInstanceHold } from "../billing/instance-budget.js";
import { segmentCost } from "../billing/instance-time.js";
import type { MemoryGuard } from "./memory-guard.js";
import { newInstanceId, type InstanceMeter } from "./metering.js";
import { privateEntry } from "./settings.js";
import { setStatus, type DeploymentRow } from "./deployment-store.js";
import type { DeploymentSettings, DeploymentStatus, InstanceFactory, InstanceSizer } from "./types.js";

export interface InstanceContext {
  db: Database;
  registry: ModelRegistry;
  meter: InstanceMeter;
  factory: InstanceFactory;
  sizer: InstanceSizer;
  memory: MemoryGuard;
  /** Billed segment length: each instance holds one segment's price against the paying key's budget ahead. */
  segmentMs: number;
  log: (message: string) => void;
}

export class LocalDeployment {
  readonly pool = new BackendPool();
  /** Metering interval id of each running instance, and the memory it holds. */
  private readonly intervals = new Map<Backend, { id: string; release(): void }>();
  /** Instances wanted now: min_instances, or more while the autoscaler says so (up to max). */
  private target: number;
  /** converge() is starting instances. */
  private starting = false;
  status: DeploymentStatus;
  failReason: string | null = null;
  deleting = false;
  private fingerprint: string | undefined;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    readonly row: DeploymentRow,
    private readonly base: CatalogEntry,
    public settings: DeploymentSettings,
    private readonly context: InstanceContext,
  ) {
    this.target = settings.minInstances;
    this.status = row.status === "failed" ? "failed" : settings.minInstances === 0 ? "stopped" : "initializing";
    this.failReason = row.status === "failed" ? row.failReason : null;
    this.publish();
  }

  get modelId(): string {
    return `${this.row.accountName}/${this.row.name}`;
  }

  get running(): number {
    return this.pool.size;
  }

  /**
   * Instances wanted and not running yet, while they are being started: read from the target, so
   * a failed start that lowers the target shows none pending the moment its status says failed
   * (a stored count was zeroed only after the failed status's write, and a reader in between saw
   * a failed deployment with an instance pending).
   */
  get pending(): number {
    return this.starting ? Math.max(0, this.target - this.running) : 0;
  }

  /** New settings: the instances go to the new min (the autoscaler may add more again); a failed deployment tries again. */
  rescale(settings: DeploymentSettings): Promise<void> {
    this.settings = settings;
    if (this.status === "failed") {
      this.status = "initializing";
      this.failReason = null;
    }
    this.target = settings.minInstances;
    return this.reconcile();
  }

  /** One more instance while requests queue, one fewer once one has idled `idleMs`; within min and max. */
  autoscale(idleMs: number): void {
    if (this.deleting || this.status !== "running") return;
    if (this.pool.waiting() > 0 && this.target < this.settings.maxInstances && this.target === this.running) {
      this.target++;
      void this.reconcile();
    } else if (this.target > this.settings.minInstances && this.target === this.running && this.pool.longestIdleMs() >= idleMs) {
      this.target--;
      void this.reconcile();
    }
  }

  /** Loads or drains instances until `target` run, one change at a time. Never rejects. */
  reconcile(): Promise<void> {
    this.chain = this.chain
      .then(() => this.converge())
      .catch((error: Error) => this.context.log(`deployment ${this.row.id}: ${error.message}`));
    return this.chain;
  }

  /** No new requests (its id is gone from the registry), the ones in flight finish, every instance unloads. */
  async delete(): Promise<void> {
    this.deleting = true;
    this.context.registry.removeDedicated(this.modelId);
    this.target = 0;
    await this.reconcile();
    await this.setStatus("deleted");
  }

  /** This process stops: unload every instance (their intervals close and are billed); the DB keeps the settings. */
  async shutdown(): Promise<void> {
    this.deleting = true;
    this.context.registry.removeDedicated(this.modelId);
    this.target = 0;
    await this.reconcile();
  }

  /**
   * Stops at once, for a disabled account or a budget that cannot cover the next segment: the
   * intervals close (and are billed) now, before the requests in flight drain, so nothing after
   * this moment is billed; then every instance unloads. `failed` keeps it down until it is scaled again.
   */
  async stopNow(status: "stopped" | "failed", reason: string): Promise<void> {
    this.target = 0;
    this.settings = { ...this.settings, minInstances: 0 };
    await Promise.all([...this.intervals.values()].map(async (held) => this.context.meter.close(held.id)));
    for (const held of this.intervals.values()) held.id = "";
    await this.setStatus(status, reason);
    await this.reconcile();
  }

  private async converge(): Promise<void> {
    this.starting = true;
    try {
      while (this.running < this.target && this.status !== "failed") {
        await this.setStatus("deploying");
        if (!(await this.startInstance())) break;
      }
    } finally {
      this.starting = false;
    }
    while (this.running > this.target) await this.stopInstance();
    if (this.deleting) return;
    // A stopped deployment keeps its reason (the account was disabled) until it runs again.
    if (this.status !== "failed") await this.setStatus(this.running > 0 ? "running" : "stopped", this.running > 0 ? null : this.failReason);
  }

  private async startInstance(): Promise<boolean> {
    let loaded: Awaited<ReturnType<InstanceFactory>>;
    const id = newInstanceId();
    let memory: { loaded(): void; release(): void } | undefined;
    try {
      // Memory first, then budget: neither is taken unless both are there.
      memory = this.context.memory.hold(await this.context.sizer(this.base, this.settings));
      await this.holdBudget(id);
      loaded = await this.context.factory(this.base, this.settings);
      memory.loaded();
    } catch (error) {
      memory?.release();
      await releaseInstanceHold(this.context.db, id);
      const reason = (error as Error).message;
      this.context.log(`deployment ${this.row.id}: no instance started: ${reason}`);
      // With instances running it keeps serving at the size it has (autoscale just does not grow); with none it has failed.
      this.target = this.running;
      // A refusal (memory, budget) says why itself; anything else came from loading the model.
      if (this.running === 0)
        await this.setStatus("failed", error instanceof ServiceError ? reason : `The model could not be loaded: ${reason}`);
      return false;
    }
    if (this.deleting) {
      await loaded.backend.close();
      memory.release();
      await releaseInstanceHold(this.context.db, id);
      return false;
    }
    await this.context.meter.open(id, this.row.id, this.hourly);
    this.intervals.set(loaded.backend, { id, release: memory.release });
    this.fingerprint ??= loaded.systemFingerprint;
    this.pool.add(loaded.backend);
    this.publish();
    return true;
  }

  private get hourly(): string {
    return this.base.pricing.dedicated_instance_hour ?? "0";
  }

  /** One segment's price held against the paying key's budget before the instance loads (a 402 when it cannot be). */
  private async holdBudget(id: string): Promise<void> {
    if (this.row.keyId === null) return;
    const { db, segmentMs } = this.context;
    await holdInstanceTime(db, this.row.keyId, id, segmentCost(this.hourly, segmentMs), 2 * segmentMs + 60_000);
  }

  private async stopInstance(): Promise<void> {
    const backend = await this.pool.drainOne();
    if (!backend) return;
    await backend.close();
    const held = this.intervals.get(backend);
    this.intervals.delete(backend);
    held?.release();
    if (held?.id) await this.context.meter.close(held.id);
    this.publish();
  }

  private async setStatus(status: DeploymentStatus, failReason: string | null = null): Promise<void> {
    if (this.status !== status || this.failReason !== failReason) {
      this.status = status;
      this.failReason = failReason;
      await setStatus(this.context.db, this.row.id, status, failReason);
    }
    this.publish();
  }

  /** The registry's view: ready with instances, else what it is doing. */
  private publish(): void {
    if (this.deleting) return;
    const state = this.running > 0 ? "ready" : this.status === "failed" ? "failed" : this.status === "stopped" ? "stopped" : "loading";
    this.context.registry.putDedicated({
      entry: privateEntry(this.base, this.modelId, this.row.createdAt),
      state,
      backend: this.running > 0 ? this.pool : undefined,
      systemFingerprint: this.fingerprint,
      error: this.failReason ?? undefined,
      dedicated: { accountId: this.row.accountId, deploymentId: this.row.id, baseModel: this.base.id },
    });
  }
}
