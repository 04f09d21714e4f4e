/**
 * What metering offers the request lifecycle: the usage ledger (one row per request), the durable
 * in-flight rows, and spend budgets. Serving calls these; billing implements them.
 */
import type { TokenPrices } from "../catalog/types.js";
import type { ServiceTier } from "../protocol/tiers.js";
import type { ApiKind } from "../protocol/request-ids.js";
import type { UsageStatus } from "../protocol/usage.js";

/** One row of the usage ledger: exactly one per request, whatever happened to it. */
export interface UsageRecord {
  requestId: string;
  accountId: string;
  keyId: string;
  model: string;
  /** The API the request came through; absent: chat completions. */
  api?: ApiKind;
  /** The batch the request is a line of; absent: a request of its own. */
  batchId?: string;
  serviceTier: ServiceTier;
  promptTokens: number;
  cachedTokens: number;
  /** Billed completion tokens: the generated ones and the rejected prediction tokens. */
  completionTokens: number;
  /** Prediction tokens that matched the output (OpenAI's accepted_prediction_tokens); absent: 0. */
  acceptedPredictionTokens?: number;
  /** Prediction tokens thrown away, billed within completionTokens (rejected_prediction_tokens); absent: 0. */
  rejectedPredictionTokens?: number;
  /** Exact decimal string, US dollars. "0" for rejected and expired requests. */
  costUsd: string;
  status: UsageStatus;
  finishReason: string | null;
  errorCode: string | null;
  queueMs: number | null;
  ttftMs: number | null;
  durationMs: number;
  /**
   * The request held no budget reservation and wrote no in-flight row: its row, written before its
   * answer went out, charges the key's spend with its cost as it is inserted. Absent: the
   * reservation is charged (at most what it held).
   */
  unreserved?: boolean;
}

export interface UsageLedger {
  /**
   * Idempotent per requestId: a second call for the same request changes nothing. Charges the
   * request's budget reservation with `costUsd` (at most what was reserved) in the same atomic
   * write, so the row and the key's spend never disagree, a crash between them included.
   */
  record(record: UsageRecord): Promise<void>;
  /**
   * Waits until every row this process had been asked to record when it was called is written (or
   * failed; rows asked for later are not waited for):
   * what a usage report waits for, so that a request answered before its row was written (an
   * embedding's) is in the report its client asks for next, and what a shutdown waits for.
   */
  settled(): Promise<void>;
  /**
   * A `completed` row whose answer never reached the client (storing the response failed after
   * generation): it becomes `failed` with `errorCode`, still billed for the tokens generated, as a
   * failed engine is. The row's status follows what the client got.
   */
  markUndelivered(requestId: string, errorCode: string): Promise<void>;
}

/** What an admitted request's durable `in_flight` row starts with. */
export interface InFlightStart {
  requestId: string;
  accountId: string;
  keyId: string;
  model: string;
  /** The API the request came through (absent: chat completions): a crash's row still names it. */
  api?: ApiKind;
  serviceTier: ServiceTier;
  promptTokens: number;
  /** The prices the request is billed at, kept with the row so a crash is billed the same. */
  prices: TokenPrices;
  /** Every choice's max_tokens together: the most the row will ever bill. */
  maxCompletionTokens: number;
  /** The batch the request is a line of (a crash leaves such a row unbilled: the line runs again). */
  batchId?: string;
  /**
   * The request's worst-case cost, reserved in the same write as the row when the key has no
   * budget (nothing there to check). Absent: the row alone.
   */
  reserveUsd?: string;
  /**
   * The row is written while the request launches (a key without a budget: see serving/admission.ts):
   * its write starts a moment later (LAUNCH_HEAD_START_MS), so the launch's own messages leave first.
   */
  besideLaunch?: boolean;
}

/** A begun in-flight row: its delivery guard, and whether the row's write reserved the budget too. */
export interface InFlightBegun {
  guard: DeliveryGuard;
  /** False when nothing was to be reserved, or when the key has a budget: SpendBudgets.reserve checks it then. */
  reserved: boolean;
}

/**
 * Keeps the durable row's billable token count at or above what was delivered, batched: the
 * count is written ahead in steps, so only a stream that outruns the writes ever waits.
 */
export interface DeliveryGuard {
  /**
   * Call before delivering output that brings the request's completion tokens (all choices) to
   * `completionTokens`. Undefined when the row already covers it; else a promise that resolves once
   * it does. `cachedTokens` is the prompt's cached part, billed at the cached price.
   */
  cover(completionTokens: number, cachedTokens: number): Promise<void> | undefined;
  /** The request's final row is being written: stop tracking it. */
  close(): void;
}

export interface InFlightLedger {
  /** Writes the request's row as `in_flight`, owned by this process, before it runs. */
  begin(start: InFlightStart): Promise<InFlightBegun>;
}

export interface BudgetReservation {
  /**
   * Turns the reservation into spend of `actualUsd` (at most the reserved amount) and frees the rest,
   * for a reservation that no ledger row settles: a request's own row does it (UsageLedger.record).
   */
  settle(actualUsd: string): Promise<void>;
}

export interface SpendBudgets {
  /**
   * Reserves the request's worst-case cost against the key's remaining budget, atomically, so
   * concurrent requests cannot overshoot it; a key without a budget reserves too, so its spend is
   * counted when the reservation settles (with the request's ledger row). Null only where nothing is metered. Throws
   * InsufficientQuota (402) when the reservation does not fit.
   */
  reserve(request: { keyId: string; requestId: string; amountUsd: string }): Promise<BudgetReservation | null>;
}
