import type { LimitLease } from "../limits/ports.js";
import type { RequestObserver } from "./ports.js";
import { requestCost } from "../billing/cost.js";
import type { TokenPrices } from "../catalog/types.js";
import type { ServiceTier } from "../protocol/tiers.js";
import type { UsageStatus } from "../protocol/usage.js";
import { GenerationStalled } from "../backends/backend.js";
import { ServiceError } from "../errors.js";
import type { ChoiceCounts, ChoiceEvent, ReportedPrompt, ServingEvent, Usage } from "./types.js";
import type { RequestMeter } from "./request-meter.js";
import { apiErrorOf } from "./backend-refusals.js";

/** A run's token counts over all its choices. `completionTokens`: generated (output) tokens only. */
export interface RunTokens {
  completionTokens: number;
  reasoningTokens: number;
  acceptedPredictionTokens: number;
  /** Billed as completion tokens beside the generated ones (as OpenAI bills them). */
  rejectedPredictionTokens: number;
}

export type Settle = (
  outcome: RunTokens & {
    status: Extract<UsageStatus, "completed" | "cancelled" | "failed" | "interrupted">;
    finishReason: string | null;
    errorCode: string | null;
    /** Per choice, the prompt size its upstream engine reported, if it did. */
    reported: ReadonlyArray<ReportedPrompt | undefined>;
  },
) => Promise<Usage>;

/**
 * Each prompt is billed once: as its engine reported it when every one of its choices got a report
 * (an upstream's usage), else as counted here (`estimates`: exact for the embedded engine).
 */
function billedPrompt(
  estimates: readonly ReportedPrompt[],
  choicesPerPrompt: number,
  reported: ReadonlyArray<ReportedPrompt | undefined>,
): { promptTokens: number; cachedPromptTokens: number } {
  let promptTokens = 0;
  let cachedPromptTokens = 0;
  estimates.forEach((estimate, p) => {
    const reports = Array.from({ length: choicesPerPrompt }, (_, i) => reported[p * choicesPerPrompt + i]);
    const all = reports.every((r) => r !== undefined) ? (reports as ReportedPrompt[]) : null;
    promptTokens += all ? Math.max(...all.map((r) => r.promptTokens)) : estimate.promptTokens;
    cachedPromptTokens += all ? Math.min(...all.map((r) => r.cachedTokens)) : estimate.cachedTokens;
  });
  return { promptTokens, cachedPromptTokens };
}

/** The reason the server aborted a run (a ServiceError, e.g. ServerShuttingDown); null when not, or when the client went away. */
export function serverAbort(signal: AbortSignal): ServiceError | null {
  return signal.aborted && signal.reason instanceof ServiceError ? signal.reason : null;
}

/** Prices the tokens used, frees the limit slot, and writes the ledger row (which settles the budget reservation with it). */
export function settlement(
  meter: RequestMeter,
  request: { tier: ServiceTier; estimates: ReportedPrompt[]; choicesPerPrompt: number; prices: TokenPrices; lease: LimitLease },
): Settle {
  return async ({
    completionTokens: generated,
    reasoningTokens,
    acceptedPredictionTokens,
    rejectedPredictionTokens,
    status,
    finishReason,
    errorCode,
    reported,
  }) => {
    const { promptTokens, cachedPromptTokens } = billedPrompt(request.estimates, request.choicesPerPrompt, reported);
    // Rejected prediction tokens were computed like any other: billed as completion tokens, at the output price.
    const completionTokens = generated + rejectedPredictionTokens;
    const tokens = { promptTokens, cachedPromptTokens, completionTokens };
    const cost = requestCost(request.prices, tokens);
    const [freed] = await Promise.allSettled([request.lease.release(promptTokens + completionTokens)]);
    // The ledger row is written even if freeing a limit failed; then that failure surfaces.
    const prediction = { acceptedPredictionTokens, rejectedPredictionTokens };
    await meter.record({
      status,
      serviceTier: request.tier,
      promptTokens,
      cachedTokens: cachedPromptTokens,
      completionTokens,
      ...prediction,
      costUsd: cost,
      finishReason,
      errorCode,
    });
    if (freed.status === "rejected") throw freed.reason;
    return { ...tokens, reasoningTokens, ...prediction, cost };
  };
}

/** Interleaves several generators, yielding each value as soon as it is ready. */
async function* merge<T>(sources: AsyncGenerator<T>[]): AsyncGenerator<T> {
  const pending = new Map<number, Promise<{ i: number; result: IteratorResult<T> }>>();
  const pull = (i: number) =>
    pending.set(
      i,
      sources[i]!.next().then((result) => ({ i, result })),
    );
  sources.forEach((_, i) => pull(i));
  try {
    while (pending.size > 0) {
      const { i, result } = await Promise.race(pending.values());
      if (result.done) {
        pending.delete(i);
        continue;
      }
      pull(i);
      yield result.value;
    }
  } finally {
    // Stops the choices still running (their sequences are freed); each ends with its own cleanup.
    await Promise.allSettled(sources.map((s) => s.return(undefined)));
  }
}

/** What metering a run needs: its meter, how to settle, who observes, and how delivery is covered. */
export interface Metering {
  meter: RequestMeter;
  settle: Settle;
  observer: RequestObserver;
  /** Resolves once the durable row would bill this many completion tokens after a crash. */
  cover: (completionTokens: number) => Promise<void> | undefined;
  /** Why the server (not the client) stopped the run, if it did: a shutdown that gave up waiting. */
  interruptedBy: () => ServiceError | null;
  /**
   * The prediction's tokens (0: none): the most one choice's rejected prediction tokens are billed
   * for, what the request's budget reservation allowed for.
   */
  predictionTokens?: number;
}

/** Each choice's running counts (prediction counts too), and the prompt sizes their engines reported. */
class Tally {
  private readonly delivered: number[];
  private readonly reasoning: number[];
  private readonly accepted: number[];
  private readonly rejected: number[];
  readonly reported: Array<ReportedPrompt | undefined>;

  constructor(
    choices: number,
    private readonly predictionTokens: number,
  ) {
    const zeros = () => new Array<number>(choices).fill(0);
    [this.delivered, this.reasoning, this.accepted, this.rejected] = [zeros(), zeros(), zeros(), zeros()];
    this.reported = new Array<ReportedPrompt | undefined>(choices).fill(undefined);
  }

  count(event: ChoiceCounts & { index: number }): void {
    const i = event.index;
    this.delivered[i] = event.completionTokens;
    this.reasoning[i] = event.reasoningTokens;
    if (!event.prediction) return;
    // Cumulative counts; the rejected ones billed are at most the prediction's length (see Metering).
    this.accepted[i] = Math.max(this.accepted[i]!, event.prediction.accepted);
    this.rejected[i] = Math.min(this.predictionTokens, Math.max(this.rejected[i]!, event.prediction.rejected));
  }

  total(): RunTokens {
    const sum = (counts: number[]) => counts.reduce((a, b) => a + b, 0);
    return {
      completionTokens: sum(this.delivered),
      reasoningTokens: sum(this.reasoning),
      acceptedPredictionTokens: sum(this.accepted),
      rejectedPredictionTokens: sum(this.rejected),
    };
  }

  /** The completion tokens a bill would count now: generated and rejected prediction tokens. */
  billable(): number {
    const { completionTokens, rejectedPredictionTokens } = this.total();
    return completionTokens + rejectedPredictionTokens;
  }
}

/**
 * The generations as serving events, with the bill settled exactly once: when every choice has
 * finished, or, if the engine fails, for the tokens already delivered, or, if the consumer walks
 * away without draining the events, for what was generated until then. Usage counts the prompt
 * once and the completion tokens of every choice. Output events pass through as they are.
 */
export async function* meteredEvents(choices: AsyncGenerator<ChoiceEvent>[], metering: Metering): AsyncGenerator<ServingEvent> {
  const { meter, observer } = metering;
  const tally = new Tally(choices.length, metering.predictionTokens ?? 0);
  let finished = 0;
  let cancelled = false;
  try {
    for await (const event of merge(choices)) {
      if (event.type === "preempted") {
        observer.preempted();
        continue;
      }
      tally.count(event);
      if (event.type !== "finish") {
        // Output leaves only once the durable row would bill it after a crash (a no-op mostly).
        await metering.cover(tally.billable());
        meter.firstToken();
        observer.output(event.index);
        yield event;
        continue;
      }
      finished++;
      tally.reported[event.index] = event.reported;
      if (event.speculation) observer.speculated(event.speculation);
      if (event.reason === "cancelled") cancelled = true;
      else yield { type: "finish", index: event.index, finishReason: event.reason };
      if (finished === choices.length) yield await settled(metering, tally, cancelled ? null : event.reason);
    }
  } catch (failure) {
    throw await failed(metering, tally, failure);
  } finally {
    if (!meter.recorded) {
      await metering.settle({ ...tally.total(), status: "cancelled", finishReason: null, errorCode: null, reported: tally.reported });
      observer.finished("abort", tally.total().completionTokens);
    }
  }
}

/** Every choice has finished (`finishReason` of the last; null: cancelled): the bill is settled. */
async function settled(metering: Metering, tally: Tally, finishReason: string | null): Promise<ServingEvent> {
  // Cancelled by the server: the client is still there and is told, as an error.
  const interruption = finishReason === null ? metering.interruptedBy() : null;
  if (interruption) throw interruption;
  const status = finishReason === null ? "cancelled" : "completed";
  const usage = await metering.settle({
    ...tally.total(),
    status,
    finishReason: finishReason ?? "cancelled",
    errorCode: null,
    reported: tally.reported,
  });
  metering.observer.finished(finishReason ?? "abort", tally.total().completionTokens);
  return { type: "done", finishReason: finishReason === null ? "cancelled" : "stop", usage };
}

/** The run failed after output began: billed for what was delivered; returns the error the caller sees. */
async function failed(metering: Metering, tally: Tally, failure: unknown): Promise<unknown> {
  const error = midStreamError(failure);
  const interrupted = error !== null && error === metering.interruptedBy();
  const errorCode = error instanceof ServiceError ? error.code : "engine_error";
  await metering.settle({
    ...tally.total(),
    status: interrupted ? "interrupted" : "failed",
    finishReason: null,
    errorCode,
    reported: tally.reported,
  });
  return error;
}

/** A backend's failure after output began, as the caller sees it (the HTTP layer sends it as an error event). */
function midStreamError(error: unknown): unknown {
  return error instanceof GenerationStalled ? apiErrorOf(error, { promptParam: "messages" }) : error;
}
