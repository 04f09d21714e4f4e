import { BackendBusy, BackendUnavailable, BackendWaitExpired, ConstraintRejected, EmptyPrompt, PromptRejected, UpstreamRejected, type Backend, type PreparedPrompt } from "../backends/backend.js";
import { requestCost } from "../billing/cost.js";
import { effectivePrices, resolveTier, type RequestedTier } from "../billing/prices.js";
import type { CatalogEntry, ServiceTier } from "../catalog/types.js";
import type { ChatMessage, EngineEvent, PauseControl, PromptOptions, SchedulingClass, TokenLogprob, ToolCall, ToolDefinition } from "../engine/types.js";
import { newRequestId, type ApiKind } from "../protocol/request-ids.js";
import { CapacityUnavailable, InvalidRequest, RateLimited, ServiceError } from "../errors.js";
import type { ModelRegistry } from "./model-registry.js";
import { requireServedModel } from "./served-model.js";
import type { KeyLimits, LimitLease, RequestLimits, RequestObserver, ServingMetrics, SpendBudgets, UsageLedger, BudgetReservation, InFlightLedger } from "./ports.js";
import { ReasoningSplitter } from "./reasoning-split.js";
import { splitReasoning } from "./reasoning-stream.js";
import { RequestMeter } from "./request-meter.js";
import { checkSchemas } from "./schema-check.js";
import { shapeChoice, type ToolShaping } from "./choice-shaping.js";
import { meteredEvents, serverAbort, settlement } from "./metered-events.js";
import { checkCapabilities, checkCheapContextBound, checkChoiceCount, completionBudget, outputConstraint } from "./request-checks.js";
import type { ToolChoice } from "./tool-calls.js";

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
  topK?: number;
  minP?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  repetitionPenalty?: number;
  /** Token id → logit bias (−100..100). */
  logitBias?: Map<number, number>;
  seed?: number;
  stop: string[];
  serviceTier?: RequestedTier;
  /** Choices to generate (each on its own sequence; seed + index when a seed is given). */
  n?: number;
  /** Report log probabilities, with this many alternatives per token. */
  logprobs?: { top: number };
  responseFormat?: { type: "json_object" } | { type: "json_schema"; schema: Record<string, unknown> };
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  /** The messages carry image parts. */
  hasImages?: boolean;
  /** `none` turns the model's thinking off where its chat template can; the others leave it on. */
  reasoningEffort?: ReasoningEffort;
  /**
   * Raw prompts (legacy completions) in place of `messages`: no chat template, no tools, no thinking.
   * Each gets `n` choices; choice `p × n + i` is prompt p's i-th.
   */
  rawPrompts?: string[];
  /** OpenAI's `prompt_cache_key`: prompts share cached prefixes only within the account and this key. */
  promptCacheKey?: string;
}

/** How the HTTP layer names the request: its id (the ledger row's too) and the API it came through. */
export interface RequestContext {
  requestId?: string;
  api?: ApiKind;
  /** Held by the HTTP layer while the client is not reading its stream: generation pauses. */
  output?: PauseControl;
}

export type ReasoningEffort = "none" | "minimal" | "low" | "medium" | "high";

export interface Usage {
  promptTokens: number;
  cachedPromptTokens: number;
  /** All generated tokens, reasoning included. */
  completionTokens: number;
  /** Of those, the tokens the model spent thinking (inside `<think>...</think>`). */
  reasoningTokens: number;
  /** US dollars, exact decimal string. */
  cost: string;
}

export type ChoiceFinishReason = "stop" | "length" | "tool_calls";

/**
 * Per choice (`index`): reasoning deltas and text deltas (with the log probabilities of the tokens
 * they complete, when asked for), or tool calls, then one `finish`. After every choice has finished, exactly one
 * `done` with the usage of all of them; its reason is `cancelled` when the caller went away.
 */
export type ServingEvent =
  | { type: "reasoning"; index: number; text: string }
  | { type: "text"; index: number; text: string; logprobs?: TokenLogprob[] }
  | { type: "tool_calls"; index: number; calls: ToolCall[] }
  | { type: "finish"; index: number; finishReason: ChoiceFinishReason }
  | { type: "done"; finishReason: "stop" | "cancelled"; usage: Usage };

export interface ChatRun {
  id: string;
  created: number;
  model: string;
  /** The tier the request is served and billed at (a tier the model lacks falls back to "default"). */
  serviceTier: ServiceTier;
  /** Stable per model file and engine configuration (see fingerprint.ts). */
  systemFingerprint: string;
  /** Text deltas, then exactly one `done` carrying the usage, even when the caller aborted. */
  events: AsyncGenerator<ServingEvent>;
  /** After `done`, the answer could not be delivered (not stored): the row says `failed` with this code. */
  undelivered(errorCode: string): Promise<void>;
}

export interface ChatService {
  /**
   * Checks and admits the request, and resolves once generation has started, so that every
   * rejection (unknown model, too long, over a limit or budget, queue full) reaches the caller
   * before any output. Every request, admitted or not, leaves exactly one ledger row.
   */
  start(caller: Caller, input: ChatInput, signal: AbortSignal, context?: RequestContext): Promise<ChatRun>;
}

export interface ChatServiceDeps {
  registry: ModelRegistry;
  ledger: UsageLedger;
  limits: RequestLimits;
  budgets: SpendBudgets;
  /** Durable rows for requests while they run (crash recovery); without it rows are written at the end only. */
  inFlight?: InFlightLedger;
  metrics?: ServingMetrics;
}

const UNOBSERVED: RequestObserver = { admitted() {}, output() {}, preempted() {}, finished() {} };

/** OpenAI's defaults for sampling when the caller sets none. */
const DEFAULT_TEMPERATURE = 1;
const DEFAULT_TOP_P = 1;

export function createChatService({ registry, ledger, limits, budgets, inFlight, metrics }: ChatServiceDeps): ChatService {
  return {
    async start(caller, input, signal, context = {}) {
      const requestId = context.requestId ?? newRequestId(context.api ?? "chat.completions");
      const meter = new RequestMeter(ledger, { requestId, accountId: caller.accountId, keyId: caller.keyId, model: input.model, api: context.api ?? "chat.completions" });
      let tier: ServiceTier = "default";
      let promptTokens = 0;
      let lease: LimitLease | undefined;
      let reservation: BudgetReservation | null = null;
      try {
        const { entry, backend, systemFingerprint, metricsModel } = readyModel(registry, caller, input.model);
        checkCapabilities(entry, backend, input);
        checkCheapContextBound(entry, backend, input);
        tier = resolveTier(entry.pricing, input.serviceTier);
        const prices = effectivePrices(entry.pricing, tier);
        const toolChoice: ToolChoice = input.tools?.length ? (input.toolChoice ?? "auto") : "none";
        const offered = toolChoice === "none" ? [] : (input.tools ?? []);
        const forced = toolChoice === "required" ? offered : typeof toolChoice === "object" ? offered.filter((t) => t.name === toolChoice.name) : [];
        checkSchemas(input, forced);
        const { constraint, constraintParam } = outputConstraint(input, forced);
        // Grammar-bound output cannot hold a think block, so the model is asked not to think.
        const thinking = input.reasoningEffort === "none" || constraint ? false : undefined;
        // Prompt workers are shared fairly between accounts.
        const fairnessKey = caller.accountId;
        const prompts = input.rawPrompts
          ? await Promise.all(input.rawPrompts.map((text) => backend.prepareText(text, { fairnessKey })))
          : [await preparePrompt(backend, input.messages, offered, { thinking, fairnessKey })];
        promptTokens = prompts.reduce((sum, p) => sum + p.tokenCount, 0);
        const n = input.n ?? 1;
        const choiceCount = n * prompts.length;
        checkChoiceCount(backend, choiceCount, input);
        const maxTokens = Math.min(...prompts.map((prompt) => completionBudget(entry, backend, prompt, input.maxTokens)));

        // The budget is reserved before the rate and concurrency limits are consulted, so a request
        // that cannot be paid for never takes a slot from one that can. Every choice may use max_tokens.
        const worstCase = requestCost(prices, { promptTokens, cachedPromptTokens: 0, completionTokens: maxTokens * choiceCount });
        // Durable before anything is reserved or run, so a crash from here on is billed and released.
        await meter.begin(inFlight, { serviceTier: tier, promptTokens, prices, maxCompletionTokens: maxTokens * choiceCount });
        reservation = await budgets.reserve({ keyId: caller.keyId, requestId, amountUsd: worstCase });
        lease = await limits.admit({ accountId: caller.accountId, keyId: caller.keyId, model: entry.id, estimatedTokens: promptTokens + maxTokens * choiceCount, limits: caller.limits });

        const shaping: ToolShaping = forced.length > 0 ? { mode: "forced", tools: forced } : toolChoice === "auto" ? { mode: "auto", tools: offered } : { mode: "none" };
        const choices = Array.from({ length: n }, (_, index) => {
          const sampling = {
            temperature: input.temperature ?? DEFAULT_TEMPERATURE,
            topP: input.topP ?? DEFAULT_TOP_P,
            topK: input.topK,
            minP: input.minP,
            presencePenalty: input.presencePenalty,
            frequencyPenalty: input.frequencyPenalty,
            repetitionPenalty: input.repetitionPenalty,
            logitBias: input.logitBias,
            seed: input.seed === undefined ? undefined : input.seed + index,
          };
          return { maxTokens, sampling, stop: input.stop, logprobs: input.logprobs, constraint, schedulingClass: SCHEDULING_CLASS[tier], cacheNamespace: cacheNamespace(caller, input) };
        });
        // Each prompt's n choices go together: the backend computes the prompt once for them.
        const generations = prompts.flatMap((prompt) => backend.generate(prompt, choices, signal, context.output));
        let cachedByPrompt: number[];
        let starts: Array<{ queuedMs: number; cachedTokens: number }>;
        try {
          starts = await Promise.all(generations.map((g) => admitted(g, constraintParam)));
          meter.admitted(Math.max(...starts.map((s) => s.queuedMs)));
          // Each prompt is billed once; only what every one of its choices found cached counts as cached.
          cachedByPrompt = prompts.map((_, p) => Math.min(...starts.slice(p * n, (p + 1) * n).map((s) => s.cachedTokens)));
        } catch (error) {
          await Promise.allSettled(generations.map((g) => g.return(undefined)));
          throw error;
        }

        const cachedPromptTokens = cachedByPrompt.reduce((a, b) => a + b, 0);
        // Metrics carry no account's name: a deployment is labelled with the catalog model it runs.
        const observer = metrics?.request(metricsModel ?? entry.id, tier) ?? UNOBSERVED;
        observer.admitted(Math.max(...starts.map((s) => s.queuedMs)), promptTokens, cachedPromptTokens);
        const estimates = prompts.map((prompt, p) => ({ promptTokens: prompt.tokenCount, cachedTokens: cachedByPrompt[p]! }));
        const settle = settlement(meter, { tier, estimates, choicesPerPrompt: n, prices, lease, reservation });
        return {
          id: requestId,
          created: Math.floor(Date.now() / 1000),
          model: entry.id,
          serviceTier: tier,
          systemFingerprint,
          events: meteredEvents(
            generations.map((g, index) => {
              const splitter = new ReasoningSplitter({ enabled: !constraint && !input.rawPrompts, startsInReasoning: prompts[Math.floor(index / n)]!.opensThinking });
              return shapeChoice(index, splitReasoning(g, splitter), shaping);
            }),
            meter,
            settle,
            observer,
            (completionTokens) => meter.cover(completionTokens, cachedPromptTokens),
            () => serverAbort(signal),
          ),
          undelivered: (errorCode) => meter.undelivered(errorCode),
        };
      } catch (thrown) {
        // Aborted by a shutdown while waiting for a sequence: that, not what the abort broke, is the answer.
        const error = serverAbort(signal) ?? thrown;
        await Promise.allSettled([lease?.release(0), reservation?.settle("0")]);
        await meter.record({
          status: error instanceof RateLimited && error.code === "resource_unavailable" ? "expired" : "rejected",
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

/** Cached prefixes are never shared across accounts; `prompt_cache_key` narrows them further within one. */
function cacheNamespace(caller: Caller, input: ChatInput): string {
  return input.promptCacheKey === undefined ? caller.accountId : JSON.stringify([caller.accountId, input.promptCacheKey]);
}

function readyModel(registry: ModelRegistry, caller: Caller, id: string): { entry: CatalogEntry; backend: Backend; systemFingerprint: string; metricsModel?: string } {
  const served = requireServedModel(registry, caller, id, "chat");
  if (!served.backend) throw new CapacityUnavailable(`The model '${id}' is still loading; retry shortly.`, 5);
  return { entry: served.entry, backend: served.backend, systemFingerprint: served.systemFingerprint ?? "fp_unknown", metricsModel: served.dedicated && `${served.dedicated.baseModel} (dedicated)` };
}

async function preparePrompt(backend: Backend, messages: ChatMessage[], tools: readonly ToolDefinition[], options: PromptOptions): Promise<PreparedPrompt> {
  try {
    return await backend.prepare(messages, tools, options);
  } catch (error) {
    if (error instanceof PromptRejected) throw new InvalidRequest(error.message, "messages");
    throw error;
  }
}

/** Which engine queue and batch precedence each billed tier gets. */
export const SCHEDULING_CLASS: Record<ServiceTier, SchedulingClass> = { priority: "priority", default: "standard", flex: "flex" };

/**
 * Waits for admission (the `started` event). A full queue is a 429 `queue_full`; a flex request that
 * found no spare capacity in time a 429 `resource_unavailable`, not billed.
 */
async function admitted(generation: AsyncGenerator<EngineEvent>, constraintParam: string | null): Promise<{ queuedMs: number; cachedTokens: number }> {
  try {
    const first = await generation.next();
    if (first.done || first.value.type !== "started") throw new Error("The backend did not start the generation.");
    return first.value;
  } catch (error) {
    if (error instanceof BackendBusy) throw new RateLimited(`${error.message} Retry shortly.`, 1, "queue_full");
    if (error instanceof BackendWaitExpired) throw new RateLimited(`${error.message} Retry later, or use the default tier.`, 60, "resource_unavailable");
    if (error instanceof ConstraintRejected) throw new InvalidRequest(`Unsupported schema: ${error.message}`, constraintParam, "invalid_schema");
    if (error instanceof EmptyPrompt) throw new InvalidRequest(error.message, "messages", "empty_prompt");
    if (error instanceof UpstreamRejected) throw new InvalidRequest(error.message, error.param, error.code);
    if (error instanceof BackendUnavailable) throw new CapacityUnavailable(`${error.message} Retry shortly.`, 5);
    throw error;
  }
}

