import { randomBytes } from "node:crypto";
import { BackendBusy, PromptRejected, type Backend, type PreparedPrompt } from "../backends/backend.js";
import { requestCost } from "../billing/cost.js";
import { effectivePrices, resolveTier, type RequestedTier } from "../billing/prices.js";
import type { CatalogEntry, ServiceTier, TokenPrices } from "../catalog/types.js";
import type { ChatMessage, EngineEvent } from "../engine/types.js";
import { CapacityUnavailable, ContextLengthExceeded, InvalidRequest, ModelNotFound, RateLimited, ServiceError } from "../errors.js";
import type { ModelRegistry } from "./model-registry.js";
import type { KeyLimits, LimitLease, RequestLimits, SpendBudgets, UsageLedger, BudgetReservation } from "./ports.js";
import { RequestMeter } from "./request-meter.js";

/** Who is asking; the serving layer needs only what scopes and limits the request. */
export interface Caller {
  accountId: string;
  keyId: string;
  allowedModels: string[] | null;
  limits: KeyLimits;
}

export interface ChatInput {
  model: string;
  messages: ChatMessage[];
  /** Absent: up to the rest of the model's context window. */
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  seed?: number;
  stop: string[];
  serviceTier?: RequestedTier;
}

export interface Usage {
  promptTokens: number;
  cachedPromptTokens: number;
  completionTokens: number;
  /** US dollars, exact decimal string. */
  cost: string;
}

export type ServingEvent =
  | { type: "text"; text: string }
  | { type: "done"; finishReason: "stop" | "length" | "cancelled"; usage: Usage };

export interface ChatRun {
  id: string;
  created: number;
  model: string;
  /** The tier the request is served and billed at (a tier the model lacks falls back to "default"). */
  serviceTier: ServiceTier;
  /** Text deltas, then exactly one `done` carrying the usage, even when the caller aborted. */
  events: AsyncGenerator<ServingEvent>;
}

export interface ChatService {
  /**
   * Checks and admits the request, and resolves once generation has started, so that every
   * rejection (unknown model, too long, over a limit or budget, queue full) reaches the caller
   * before any output. Every request, admitted or not, leaves exactly one ledger row.
   */
  start(caller: Caller, input: ChatInput, signal: AbortSignal): Promise<ChatRun>;
}

export interface ChatServiceDeps {
  registry: ModelRegistry;
  ledger: UsageLedger;
  limits: RequestLimits;
  budgets: SpendBudgets;
}

/** OpenAI's defaults for sampling when the caller sets none. */
const DEFAULT_TEMPERATURE = 1;
const DEFAULT_TOP_P = 1;

export function createChatService({ registry, ledger, limits, budgets }: ChatServiceDeps): ChatService {
  return {
    async start(caller, input, signal) {
      const requestId = completionId();
      const meter = new RequestMeter(ledger, { requestId, accountId: caller.accountId, keyId: caller.keyId, model: input.model });
      let tier: ServiceTier = "default";
      let promptTokens = 0;
      let lease: LimitLease | undefined;
      let reservation: BudgetReservation | null = null;
      try {
        const { entry, backend } = readyModel(registry, caller, input.model);
        tier = resolveTier(entry.pricing, input.serviceTier);
        const prices = effectivePrices(entry.pricing, tier);
        const prompt = await preparePrompt(backend, input.messages);
        promptTokens = prompt.tokenCount;
        const maxTokens = completionBudget(entry, backend, prompt, input.maxTokens);

        // The budget is reserved before the rate and concurrency limits are consulted, so a request
        // that cannot be paid for never takes a slot from one that can.
        const worstCase = requestCost(prices, { promptTokens, cachedPromptTokens: 0, completionTokens: maxTokens });
        reservation = await budgets.reserve({ keyId: caller.keyId, requestId, amountUsd: worstCase, budgetUsd: caller.limits.budgetUsd });
        lease = await limits.admit({ accountId: caller.accountId, keyId: caller.keyId, model: entry.id, estimatedTokens: promptTokens + maxTokens, limits: caller.limits });

        const sampling = { temperature: input.temperature ?? DEFAULT_TEMPERATURE, topP: input.topP ?? DEFAULT_TOP_P, seed: input.seed };
        const generation = backend.generate(prompt, { maxTokens, sampling, stop: input.stop }, signal);
        meter.admitted(await admitted(generation));

        const settle = settlement(meter, { tier, promptTokens, prices, lease, reservation });
        return {
          id: requestId,
          created: Math.floor(Date.now() / 1000),
          model: entry.id,
          serviceTier: tier,
          events: meteredEvents(generation, meter, settle),
        };
      } catch (error) {
        await Promise.allSettled([lease?.release(0), reservation?.settle("0")]);
        await meter.record({
          status: "rejected",
          serviceTier: tier,
          promptTokens,
          cachedTokens: 0,
          completionTokens: 0,
          costUsd: "0",
          finishReason: null,
          errorCode: error instanceof ServiceError ? (error.code ?? error.type) : "internal_error",
        });
        throw error;
      }
    },
  };
}

function readyModel(registry: ModelRegistry, caller: Caller, id: string): { entry: CatalogEntry; backend: Backend } {
  const served = registry.get(id);
  if (!served || (caller.allowedModels && !caller.allowedModels.includes(id))) throw new ModelNotFound(id);
  if (served.state === "failed") throw new CapacityUnavailable(`The model '${id}' failed to load: ${served.error ?? "unknown error"}`, 60);
  if (served.state !== "ready" || !served.backend) throw new CapacityUnavailable(`The model '${id}' is still loading; retry shortly.`, 5);
  return { entry: served.entry, backend: served.backend };
}

async function preparePrompt(backend: Backend, messages: ChatMessage[]): Promise<PreparedPrompt> {
  try {
    return await backend.prepare(messages);
  } catch (error) {
    if (error instanceof PromptRejected) throw new InvalidRequest(error.message, "messages");
    throw error;
  }
}

/** max_tokens as asked, or the rest of the context window; either way the whole must fit. */
function completionBudget(entry: CatalogEntry, backend: Backend, prompt: PreparedPrompt, requested: number | undefined): number {
  const window = Math.min(backend.contextWindow, entry.context_length);
  const maxTokens = requested ?? window - prompt.tokenCount;
  if (maxTokens < 1 || prompt.tokenCount + maxTokens > window) {
    throw new ContextLengthExceeded(window, prompt.tokenCount, Math.max(maxTokens, requested ?? 1));
  }
  return maxTokens;
}

/** Waits for admission (the `started` event) and returns the time spent queued; a full queue is a 429. */
async function admitted(generation: AsyncGenerator<EngineEvent>): Promise<number> {
  try {
    const first = await generation.next();
    if (first.done || first.value.type !== "started") throw new Error("The backend did not start the generation.");
    return first.value.queuedMs;
  } catch (error) {
    if (error instanceof BackendBusy) throw new RateLimited(`${error.message} Retry shortly.`, 1, "queue_full");
    throw error;
  }
}

type Settle = (outcome: { completionTokens: number; status: "completed" | "cancelled" | "failed"; finishReason: string | null; errorCode: string | null }) => Promise<Usage>;

/** Prices the tokens used, frees the limit slot, settles the budget and writes the ledger row. */
function settlement(
  meter: RequestMeter,
  request: { tier: ServiceTier; promptTokens: number; prices: TokenPrices; lease: LimitLease; reservation: BudgetReservation | null },
): Settle {
  return async ({ completionTokens, status, finishReason, errorCode }) => {
    const tokens = { promptTokens: request.promptTokens, cachedPromptTokens: 0, completionTokens };
    const cost = requestCost(request.prices, tokens);
    const freed = await Promise.allSettled([request.lease.release(request.promptTokens + completionTokens), request.reservation?.settle(cost)]);
    // The ledger row is written even if freeing a limit or settling a budget failed; then that failure surfaces.
    await meter.record({ status, serviceTier: request.tier, promptTokens: request.promptTokens, cachedTokens: 0, completionTokens, costUsd: cost, finishReason, errorCode });
    const failure = freed.find((r) => r.status === "rejected");
    if (failure) throw failure.reason;
    return { ...tokens, cost };
  };
}

/**
 * The generation as serving events, with the bill settled exactly once: at the finish event, or,
 * if the engine fails, for the tokens already delivered, or, if the consumer walks away without
 * draining the events, for what was generated until then.
 */
async function* meteredEvents(generation: AsyncGenerator<EngineEvent>, meter: RequestMeter, settle: Settle): AsyncGenerator<ServingEvent> {
  let delivered = 0;
  try {
    for await (const event of generation) {
      if (event.type === "text") {
        meter.firstToken();
        delivered = event.completionTokens;
        yield { type: "text", text: event.text };
      } else if (event.type === "finish") {
        const status = event.reason === "cancelled" ? "cancelled" : "completed";
        const usage = await settle({ completionTokens: event.completionTokens, status, finishReason: event.reason, errorCode: null });
        yield { type: "done", finishReason: event.reason, usage };
      }
    }
  } catch (error) {
    await settle({ completionTokens: delivered, status: "failed", finishReason: null, errorCode: error instanceof ServiceError ? error.code : "engine_error" });
    throw error;
  } finally {
    if (!meter.recorded) await settle({ completionTokens: delivered, status: "cancelled", finishReason: null, errorCode: null });
  }
}

function completionId(): string {
  return `chatcmpl-${randomBytes(18).toString("base64url")}`;
}
