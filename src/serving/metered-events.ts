import type { BudgetReservation, LimitLease, RequestObserver } from "./ports.js";
import { requestCost } from "../billing/cost.js";
import type { ServiceTier, TokenPrices } from "../catalog/types.js";
import { GenerationStalled } from "../backends/backend.js";
import { ServiceError } from "../errors.js";
import type { ServingEvent, Usage } from "./chat-service.js";
import type { ChoiceEvent } from "./choice-shaping.js";
import type { ReportedPrompt } from "./reasoning-stream.js";
import type { RequestMeter } from "./request-meter.js";

export type Settle = (outcome: {
  completionTokens: number;
  reasoningTokens: number;
  status: "completed" | "cancelled" | "failed" | "interrupted";
  finishReason: string | null;
  errorCode: string | null;
  /** Per choice, the prompt size its upstream engine reported, if it did. */
  reported: ReadonlyArray<ReportedPrompt | undefined>;
}) => Promise<Usage>;

/**
 * Each prompt is billed once: as its engine reported it when every one of its choices got a report
 * (an upstream's usage), else as counted here (`estimates`: exact for the embedded engine).
 */
function billedPrompt(estimates: readonly ReportedPrompt[], choicesPerPrompt: number, reported: ReadonlyArray<ReportedPrompt | undefined>): { promptTokens: number; cachedPromptTokens: number } {
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

/** Prices the tokens used, frees the limit slot, settles the budget and writes the ledger row. */
export function settlement(
  meter: RequestMeter,
  request: { tier: ServiceTier; estimates: ReportedPrompt[]; choicesPerPrompt: number; prices: TokenPrices; lease: LimitLease; reservation: BudgetReservation | null },
): Settle {
  return async ({ completionTokens, reasoningTokens, status, finishReason, errorCode, reported }) => {
    const { promptTokens, cachedPromptTokens } = billedPrompt(request.estimates, request.choicesPerPrompt, reported);
    const tokens = { promptTokens, cachedPromptTokens, completionTokens };
    const cost = requestCost(request.prices, tokens);
    const freed = await Promise.allSettled([request.lease.release(promptTokens + completionTokens), request.reservation?.settle(cost)]);
    // The ledger row is written even if freeing a limit or settling a budget failed; then that failure surfaces.
    await meter.record({ status, serviceTier: request.tier, promptTokens, cachedTokens: cachedPromptTokens, completionTokens, costUsd: cost, finishReason, errorCode });
    const failure = freed.find((r) => r.status === "rejected");
    if (failure) throw failure.reason;
    return { ...tokens, reasoningTokens, cost };
  };
}


/** Interleaves several generators, yielding each value as soon as it is ready. */
async function* merge<T>(sources: AsyncGenerator<T>[]): AsyncGenerator<T> {
  const pending = new Map<number, Promise<{ i: number; result: IteratorResult<T> }>>();
  const pull = (i: number) => pending.set(i, sources[i]!.next().then((result) => ({ i, result })));
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

/**
 * The generations as serving events, with the bill settled exactly once: when every choice has
 * finished, or, if the engine fails, for the tokens already delivered, or, if the consumer walks
 * away without draining the events, for what was generated until then. Usage counts the prompt
 * once and the completion tokens of every choice.
 */
export async function* meteredEvents(
  choices: AsyncGenerator<ChoiceEvent>[],
  meter: RequestMeter,
  settle: Settle,
  observer: RequestObserver,
  cover: (completionTokens: number) => Promise<void> | undefined,
  /** Why the server (not the client) stopped the run, if it did: a shutdown that gave up waiting. */
  interruptedBy: () => ServiceError | null = () => null,
): AsyncGenerator<ServingEvent> {
  const delivered = new Array<number>(choices.length).fill(0);
  const deliveredReasoning = new Array<number>(choices.length).fill(0);
  const reported = new Array<ReportedPrompt | undefined>(choices.length).fill(undefined);
  const sum = (counts: number[]) => counts.reduce((a, b) => a + b, 0);
  const total = () => ({ completionTokens: sum(delivered), reasoningTokens: sum(deliveredReasoning) });
  let finished = 0;
  let cancelled = false;
  try {
    for await (const event of merge(choices)) {
      if (event.type === "preempted") {
        observer.preempted();
        continue;
      }
      delivered[event.index] = event.completionTokens;
      deliveredReasoning[event.index] = event.reasoningTokens;
      // Output leaves only once the durable row would bill it after a crash (a no-op mostly).
      if (event.type !== "finish") await cover(total().completionTokens);
      if (event.type === "reasoning") {
        meter.firstToken();
        observer.output(event.index);
        yield { type: "reasoning", index: event.index, text: event.text };
      } else if (event.type === "text") {
        meter.firstToken();
        observer.output(event.index);
        yield { type: "text", index: event.index, text: event.text, ...(event.logprobs ? { logprobs: event.logprobs } : {}) };
      } else if (event.type === "tool_calls") {
        meter.firstToken();
        observer.output(event.index);
        yield { type: "tool_calls", index: event.index, calls: event.calls };
      } else {
        finished++;
        reported[event.index] = event.reported;
        if (event.reason === "cancelled") cancelled = true;
        else yield { type: "finish", index: event.index, finishReason: event.reason };
        if (finished === choices.length) {
          // Cancelled by the server: the client is still there and is told, as an error.
          const interruption = cancelled ? interruptedBy() : null;
          if (interruption) throw interruption;
          const status = cancelled ? "cancelled" : "completed";
          const usage = await settle({ ...total(), status, finishReason: cancelled ? "cancelled" : event.reason, errorCode: null, reported });
          observer.finished(cancelled ? "abort" : event.reason, total().completionTokens);
          yield { type: "done", finishReason: cancelled ? "cancelled" : "stop", usage };
        }
      }
    }
  } catch (failure) {
    const error = midStreamError(failure);
    const interrupted = error !== null && error === interruptedBy();
    const errorCode = error instanceof ServiceError ? error.code : "engine_error";
    await settle({ ...total(), status: interrupted ? "interrupted" : "failed", finishReason: null, errorCode, reported });
    throw error;
  } finally {
    if (!meter.recorded) {
      await settle({ ...total(), status: "cancelled", finishReason: null, errorCode: null, reported });
      observer.finished("abort", total().completionTokens);
    }
  }
}


/** A backend's failure after output began, as the caller sees it (the HTTP layer sends it as an error event). */
function midStreamError(error: unknown): unknown {
  if (error instanceof GenerationStalled) return new ServiceError(500, "server_error", error.message, "timeout");
  return error;
}
