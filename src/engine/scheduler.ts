/**
 * Admission to a model's fixed set of sequence slots, by scheduling class.
 *
 * - A freed slot goes to the oldest waiting `priority` request, else `standard`, else `flex`: flex
 *   runs only on capacity nobody else is waiting for.
 * - A flex request waits at most `flexMaxWaitMs`, then fails with WaitExpiredError.
 * - When a priority or standard request has to wait while flex requests hold slots, the flex
 *   request admitted last is preempted: its lease's `preemption` signal fires, it gives its slot
 *   back, and it re-enters at the head of its queue (`resumed`), exempt from the wait limit and
 *   the queue bound, so its client sees a pause and never an error. A priority request that
 *   still has to wait preempts standard requests the same way.
 * - At most `maxWaiting` new requests wait; beyond that QueueFullError.
 *
 * Each slot is one sequence with its own KV cells, so "KV cells run short" is "no slot is free".
 */
export type SchedulingClass = "priority" | "standard" | "flex";

export const SCHEDULING_CLASSES: readonly SchedulingClass[] = ["priority", "standard", "flex"];

export class QueueFullError extends Error {}
export class WaitExpiredError extends Error {}

export interface SlotLease {
  readonly schedulingClass: SchedulingClass;
  /** Fires when the scheduler wants this (flex) slot back; the holder should stop and release soon. */
  readonly preemption: AbortSignal;
  /** Idempotent. */
  release(): void;
}

export interface SchedulerOptions {
  slots: number;
  maxWaiting: number;
  flexMaxWaitMs: number;
}

export interface AcquireOptions {
  signal?: AbortSignal;
  /** A preempted flex request coming back: first in the flex queue, never expires, never refused. */
  resumed?: boolean;
}

export interface SchedulerStats {
  slots: number;
  running: Record<SchedulingClass, number>;
  waiting: Record<SchedulingClass, number>;
  preemptions: number;
}

interface Waiter {
  /** Called with the lease already counted as running, so a free slot is handed out exactly once. */
  grant: (lease: SlotLease) => void;
  resumed: boolean;
}

interface Lease extends SlotLease {
  readonly controller: AbortController;
}

export class SlotScheduler {
  private readonly running: Lease[] = []; // in order of admission
  private readonly queues: Record<SchedulingClass, Waiter[]> = { priority: [], standard: [], flex: [] };
  private preemptions = 0;

  constructor(private readonly options: SchedulerOptions) {}

  stats(): SchedulerStats {
    const running = { priority: 0, standard: 0, flex: 0 };
    for (const lease of this.running) running[lease.schedulingClass]++;
    const waiting = { priority: this.queues.priority.length, standard: this.queues.standard.length, flex: this.queues.flex.length };
    return { slots: this.options.slots, running, waiting, preemptions: this.preemptions };
  }

  /** Resolves once a slot is held; release the lease exactly once when done with the slot. */
  async acquire(schedulingClass: SchedulingClass, { signal, resumed = false }: AcquireOptions = {}): Promise<SlotLease> {
    signal?.throwIfAborted();
    if (this.running.length < this.options.slots && this.waitingCount() === 0) return this.admit(schedulingClass);
    if (!resumed && this.waitingCount() >= this.options.maxWaiting) throw new QueueFullError("The model's request queue is full.");
    const queue = this.queues[schedulingClass];
    return new Promise<SlotLease>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const leave = (error: unknown) => {
        queue.splice(queue.indexOf(waiter), 1);
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        reject(error);
      };
      const onAbort = () => leave(signal?.reason ?? new Error("aborted"));
      const waiter: Waiter = {
        resumed,
        grant: (lease) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve(lease);
        },
      };
      const firstNew = queue.findIndex((w) => !w.resumed);
      if (resumed && firstNew !== -1) queue.splice(firstNew, 0, waiter);
      else queue.push(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
      if (schedulingClass === "flex" && !resumed) {
        timer = setTimeout(() => leave(new WaitExpiredError(`No capacity for this flex request within ${Math.round(this.options.flexMaxWaitMs / 1000)} s.`)), this.options.flexMaxWaitMs);
      }
      this.preemptForWaiters();
    });
  }

  private waitingCount(): number {
    return this.queues.priority.length + this.queues.standard.length + this.queues.flex.length;
  }

  private admit(schedulingClass: SchedulingClass): SlotLease {
    const controller = new AbortController();
    let released = false;
    const lease: Lease = {
      schedulingClass,
      controller,
      preemption: controller.signal,
      release: () => {
        if (released) return;
        released = true;
        this.running.splice(this.running.indexOf(lease), 1);
        this.grantFreeSlots();
      },
    };
    this.running.push(lease);
    return lease;
  }

  private grantFreeSlots(): void {
    for (const schedulingClass of SCHEDULING_CLASSES) {
      const queue = this.queues[schedulingClass];
      while (this.running.length < this.options.slots && queue.length > 0) queue.shift()!.grant(this.admit(schedulingClass));
    }
  }

  /**
   * Asks slots back for the waiters that free slots will not cover: flex slots (latest admitted
   * first) for priority and standard waiters, then standard slots for priority waiters, so that
   * priority work never waits for a whole generation to end.
   */
  private preemptForWaiters(): void {
    const priority = this.queues.priority.length;
    const waiting = priority + this.queues.standard.length;
    if (waiting === 0) return;
    let covered = this.running.filter((lease) => lease.preemption.aborted).length;
    const latestFirst = (schedulingClass: SchedulingClass) => this.running.filter((l) => l.schedulingClass === schedulingClass && !l.preemption.aborted).reverse();
    for (const [victims, need] of [
      [latestFirst("flex"), waiting],
      [latestFirst("standard"), priority],
    ] as const) {
      for (const lease of victims) {
        if (covered >= need) break;
        lease.controller.abort();
        this.preemptions++;
        covered++;
      }
    }
  }
}
