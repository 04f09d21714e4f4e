import type { ApiKind } from "../protocol/request-ids.js";
import type { RequestTrace } from "./ports.js";
import { UNTRACED } from "./run-trace.js";
import type { DeliveryGuard, InFlightLedger, InFlightStart, UsageLedger, UsageRecord } from "../billing/ports.js";

/** Who and what a request is, fixed at admission: the ledger row's identity (the API always named). */
export type MeterContext = Pick<UsageRecord, "requestId" | "accountId" | "keyId" | "model" | "batchId"> & { api: ApiKind };

/** How the request ended: the ledger row's outcome. */
export type MeterOutcome = Pick<
  UsageRecord,
  | "status"
  | "serviceTier"
  | "promptTokens"
  | "cachedTokens"
  | "completionTokens"
  | "acceptedPredictionTokens"
  | "rejectedPredictionTokens"
  | "costUsd"
  | "finishReason"
  | "errorCode"
  | "unreserved"
>;

/**
 * Times one request and writes its ledger row exactly once: the first outcome wins, later calls
 * (an error path after a finish, a generator closed after its last event) are ignored.
 */
export class RequestMeter {
  private readonly startedAt = performance.now();
  private queueMs: number | null = null;
  private ttftMs: number | null = null;
  private written: Promise<void> | null = null;
  private guard: DeliveryGuard | null = null;

  constructor(
    private readonly ledger: UsageLedger,
    readonly context: MeterContext,
    private readonly trace: RequestTrace = UNTRACED,
  ) {}

  /**
   * Writes the durable `in_flight` row (when the service keeps them) before the request runs, with
   * the budget reservation when `start.reserveUsd` is given and the key has no budget: whether it did.
   */
  async begin(inFlight: InFlightLedger | undefined, start: Omit<InFlightStart, keyof MeterContext>): Promise<boolean> {
    if (!inFlight || this.written) return false;
    const { guard, reserved } = await inFlight.begin({ ...this.context, ...start });
    this.guard = guard;
    return reserved;
  }

  /** Before delivering output that brings the completion tokens to `completionTokens`: see DeliveryGuard. */
  cover(completionTokens: number, cachedTokens: number): Promise<void> | undefined {
    return this.guard?.cover(completionTokens, cachedTokens);
  }

  admitted(queueMs: number): void {
    this.queueMs = Math.round(queueMs);
  }

  firstToken(): void {
    this.ttftMs ??= Math.round(performance.now() - this.startedAt);
  }

  get recorded(): boolean {
    return this.written !== null;
  }

  /** The answer was not delivered after all (see UsageLedger.markUndelivered); after record() only. */
  async undelivered(errorCode: string): Promise<void> {
    if (!this.written) return;
    await this.written;
    await this.ledger.markUndelivered(this.context.requestId, errorCode);
  }

  record(outcome: MeterOutcome): Promise<void> {
    if (this.written) return this.written;
    this.guard?.close();
    const row: UsageRecord = {
      ...this.context,
      ...outcome,
      queueMs: this.queueMs,
      ttftMs: this.ttftMs,
      durationMs: Math.round(performance.now() - this.startedAt),
    };
    const writing = this.trace.stage("switchyard.ledger");
    this.written = this.ledger.record(row).finally(() => writing.end({ "switchyard.ledger.status": outcome.status }));
    return this.written;
  }
}
