import { BackendBusy, BackendUnavailable, BackendWaitExpired, ConstraintRejected, PromptRejected, UpstreamRejected, type Backend, type PreparedPrompt } from "../backends/backend.js";
import { requestCost } from "../billing/cost.js";
import { effectivePrices, resolveTier, type RequestedTier } from "../billing/prices.js";
import type { CatalogEntry, ServiceTier, TokenPrices } from "../catalog/types.js";
import type { ChatMessage, EngineEvent, OutputConstraint, PromptOptions, SchedulingClass, TokenLogprob, ToolCall, ToolDefinition } from "../engine/types.js";
import { newRequestId, type ApiKind } from "../protocol/request-ids.js";
import { CapacityUnavailable, ContextLengthExceeded, InvalidRequest, ModelNotFound, RateLimited, ServiceError } from "../errors.js";
import { visibleTo, type ModelRegistry } from "./model-registry.js";
import type { KeyLimits, LimitLease, RequestLimits, RequestObserver, ServingMetrics, SpendBudgets, UsageLedger, BudgetReservation, InFlightLedger } from "./ports.js";
import { ReasoningSplitter } from "./reasoning-split.js";
import { splitReasoning, type ReportedPrompt, type SplitEvent } from "./reasoning-stream.js";
import { RequestMeter } from "./request-meter.js";
import { checkSchemas } from "./schema-check.js";
import { mayBeToolCall, parseToolCalls, partialToolCall, toolCallConstraint, type ToolChoice } from "./tool-calls.js";

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
        const prompts = input.rawPrompts
          ? await Promise.all(input.rawPrompts.map((text) => backend.prepareText(text)))
          : [await preparePrompt(backend, input.messages, offered, { thinking })];
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
        reservation = await budgets.reserve({ keyId: caller.keyId, requestId, amountUsd: worstCase, budgetUsd: caller.limits.budgetUsd });
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
        const generations = prompts.flatMap((prompt) => backend.generate(prompt, choices, signal));
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
          ),
        };
      } catch (error) {
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
  const served = registry.get(id);
  // Another account's deployment is refused exactly like a model that does not exist.
  if (!served || !visibleTo(served, caller.accountId) || (caller.allowedModels && !caller.allowedModels.includes(id))) throw new ModelNotFound(id);
  if (served.state === "stopped") throw new ServiceError(503, "server_error", `The deployment '${id}' is scaled to zero instances; scale it up (PATCH /v1/deployments/{id} with min_instances ≥ 1) to call it.`, "deployment_stopped");
  if (served.state === "elsewhere") throw new CapacityUnavailable(`The deployment '${id}' runs on another server process sharing this database and could not be forwarded there; retry shortly.`, 5);
  if (served.state === "not_pulled") {
    const how = `Pull it with 'switchyard models pull ${id}' (or 'npx switchyard models pull ${id}'), then restart the server.`;
    throw new ServiceError(503, "server_error", `The model '${id}' is in the catalog but not pulled on this server. ${how}`, "model_not_pulled");
  }
  if (served.state === "failed") throw new CapacityUnavailable(`The model '${id}' failed to load: ${served.error ?? "unknown error"}`, 60);
  if (served.state !== "ready" || !served.backend) throw new CapacityUnavailable(`The model '${id}' is still loading; retry shortly.`, 5);
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

/** max_tokens as asked, or the rest of the context window; either way the whole must fit. */
function completionBudget(entry: CatalogEntry, backend: Backend, prompt: PreparedPrompt, requested: number | undefined): number {
  const window = Math.min(backend.contextWindow, entry.context_length);
  // An upper-bound count cannot refuse a prompt: the upstream engine, which tokenizes, checks the window.
  if (prompt.tokenCountIsUpperBound) {
    if (requested !== undefined && requested >= window) throw new ContextLengthExceeded(window, 1, requested, true);
    return requested ?? Math.max(1, window - prompt.tokenCount);
  }
  const maxTokens = requested ?? window - prompt.tokenCount;
  if (maxTokens < 1 || prompt.tokenCount + maxTokens > window) {
    throw new ContextLengthExceeded(window, prompt.tokenCount, Math.max(maxTokens, requested ?? 1));
  }
  return maxTokens;
}

/**
 * Rendering and tokenizing a prompt costs time in proportion to its size; a prompt that cannot fit
 * is refused before that. Every message costs at least one token, and the backend may know a
 * tighter lower bound from the text's size; each raw prompt must fit on its own.
 */
function checkCheapContextBound(entry: CatalogEntry, backend: Backend, input: ChatInput): void {
  const window = Math.min(backend.contextWindow, entry.context_length);
  const completion = input.maxTokens ?? 1;
  const atLeast = input.rawPrompts
    ? Math.max(0, ...input.rawPrompts.map((text) => backend.minimumTextTokens?.(text) ?? 0))
    : Math.max(input.messages.length, backend.minimumPromptTokens?.(input.messages) ?? 0);
  if (atLeast + completion > window) throw new ContextLengthExceeded(window, atLeast, completion, true);
}

/** Which engine queue and batch precedence each billed tier gets. */
const SCHEDULING_CLASS: Record<ServiceTier, SchedulingClass> = { priority: "priority", default: "standard", flex: "flex" };

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
    if (error instanceof UpstreamRejected) throw new InvalidRequest(error.message, error.param, error.code);
    if (error instanceof BackendUnavailable) throw new CapacityUnavailable(`${error.message} Retry shortly.`, 5);
    throw error;
  }
}

type Settle = (outcome: {
  completionTokens: number;
  reasoningTokens: number;
  status: "completed" | "cancelled" | "failed";
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

/** Prices the tokens used, frees the limit slot, settles the budget and writes the ledger row. */
function settlement(
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

/** One choice's events, tagged with its index, before metering; token counts are running totals. */
type ChoiceEvent = { index: number; completionTokens: number; reasoningTokens: number } & (
  | { type: "preempted" }
  | { type: "reasoning"; text: string }
  | { type: "text"; text: string; logprobs?: TokenLogprob[] }
  | { type: "tool_calls"; calls: ToolCall[] }
  | { type: "finish"; reason: "stop" | "length" | "cancelled" | "tool_calls"; reported?: ReportedPrompt }
);

type ToolShaping = { mode: "none" } | { mode: "forced"; tools: readonly ToolDefinition[] } | { mode: "auto"; tools: readonly ToolDefinition[] };

/**
 * Turns one generation into choice events. With tools offered, text that may be a call is held
 * back: forced (`required` or a named tool) holds everything and, the output being grammar-bound,
 * returns it as tool calls; `auto` holds text only while it still starts like a call (`{`, `[`,
 * `<tool_call>` or a code fence) and, at the end, returns tool calls if the whole text parses as a
 * call of an offered tool (see parseToolCalls), else releases it as content. Reasoning is never
 * held: only the content after it can be a call.
 */
async function* shapeChoice(index: number, generation: AsyncGenerator<SplitEvent>, shaping: ToolShaping): AsyncGenerator<ChoiceEvent> {
  let holding = shaping.mode !== "none";
  let held = "";
  let heldLogprobs: TokenLogprob[] | undefined;
  let upstreamCalls = false;
  for await (const event of generation) {
    const counts = { completionTokens: event.completionTokens, reasoningTokens: event.reasoningTokens };
    if (event.type === "reasoning" || event.type === "preempted") {
      yield { index, ...event };
      continue;
    }
    if (event.type === "tool_calls") {
      // An upstream engine parsed these calls itself; they pass as they are.
      upstreamCalls = true;
      yield { index, ...event };
      continue;
    }
    if (event.type === "text") {
      if (holding) {
        held += event.text;
        if (event.logprobs) (heldLogprobs ??= []).push(...event.logprobs);
        if (shaping.mode === "auto" && !mayBeToolCall(held)) {
          holding = false;
          yield { type: "text", index, text: held, ...counts, ...(heldLogprobs ? { logprobs: heldLogprobs } : {}) };
          held = "";
          heldLogprobs = undefined;
        }
        continue;
      }
      yield { index, ...event };
      continue;
    }
    const reported = event.reported ? { reported: event.reported } : {};
    if (upstreamCalls) {
      if (held && event.reason !== "cancelled") yield { type: "text", index, text: held, ...counts, ...(heldLogprobs ? { logprobs: heldLogprobs } : {}) };
      yield { type: "finish", index, reason: event.reason === "stop" ? "tool_calls" : event.reason, ...counts, ...reported };
      return;
    }
    if (holding && event.reason !== "cancelled" && shaping.mode !== "none") {
      // A forced call cut by max_tokens still comes back as a call, with its partial arguments.
      const cut = event.reason === "length";
      const calls = cut ? (shaping.mode === "forced" ? partialToolCall(held, shaping.tools) : null) : parseToolCalls(held, shaping.tools);
      if (calls) {
        yield { type: "tool_calls", index, calls, ...counts };
        yield { type: "finish", index, reason: cut ? "length" : "tool_calls", ...counts, ...reported };
        return;
      }
      if (held) yield { type: "text", index, text: held, ...counts, ...(heldLogprobs ? { logprobs: heldLogprobs } : {}) };
    }
    yield { type: "finish", index, reason: event.reason, ...counts, ...reported };
  }
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
async function* meteredEvents(
  choices: AsyncGenerator<ChoiceEvent>[],
  meter: RequestMeter,
  settle: Settle,
  observer: RequestObserver,
  cover: (completionTokens: number) => Promise<void> | undefined,
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
          const status = cancelled ? "cancelled" : "completed";
          const usage = await settle({ ...total(), status, finishReason: cancelled ? "cancelled" : event.reason, errorCode: null, reported });
          observer.finished(cancelled ? "abort" : event.reason, total().completionTokens);
          yield { type: "done", finishReason: cancelled ? "cancelled" : "stop", usage };
        }
      }
    }
  } catch (error) {
    await settle({ ...total(), status: "failed", finishReason: null, errorCode: error instanceof ServiceError ? error.code : "engine_error", reported });
    throw error;
  } finally {
    if (!meter.recorded) {
      await settle({ ...total(), status: "cancelled", finishReason: null, errorCode: null, reported });
      observer.finished("abort", total().completionTokens);
    }
  }
}

/**
 * Every choice must hold a sequence at once: the choices are admitted together, so one more than
 * the model runs at once would wait for a sequence its own request holds.
 */
function checkChoiceCount(backend: Backend, choices: number, input: ChatInput): void {
  const slots = backend.stats().slots;
  if (choices <= slots) return;
  const asked = input.rawPrompts ? `${input.rawPrompts.length} prompts × n=${input.n ?? 1}` : `n=${input.n ?? 1}`;
  throw new InvalidRequest(`This request asks for ${choices} choices (${asked}), more than the ${slots} this model generates at once.`, input.rawPrompts ? "prompt" : "n", "too_many_choices");
}

/** The model's catalog tags say what it can do; asking for more is a 400 naming what is missing. */
function checkCapabilities(entry: CatalogEntry, backend: Backend, input: ChatInput): void {
  const has = (tag: string) => entry.tags.some((t) => t.toLowerCase() === tag.toLowerCase());
  if (input.responseFormat && !has("JSON")) {
    throw new InvalidRequest(`The model '${entry.id}' does not support JSON output (response_format).`, "response_format", "unsupported_capability");
  }
  if (input.tools?.length && !has("Function")) {
    throw new InvalidRequest(`The model '${entry.id}' does not support function calling (tools).`, "tools", "unsupported_capability");
  }
  if (input.hasImages && !has("Multimodal")) {
    throw new InvalidRequest(`The model '${entry.id}' does not support image input (Multimodal).`, "messages", "unsupported_capability");
  }
  for (const token of input.logitBias?.keys() ?? []) {
    if (backend.vocabularySize > 0 && token >= backend.vocabularySize) {
      throw new InvalidRequest(`Invalid 'logit_bias': token id ${token} is outside the model's vocabulary of ${backend.vocabularySize} tokens.`, "logit_bias", "invalid_value");
    }
  }
}

/** A forced tool call's grammar wins over response_format (OpenAI applies response_format to content only). */
function outputConstraint(input: ChatInput, forced: readonly ToolDefinition[]): { constraint: OutputConstraint | undefined; constraintParam: string | null } {
  if (forced.length > 0) return { constraint: toolCallConstraint(forced), constraintParam: "tools" };
  const format = input.responseFormat;
  if (format?.type === "json_object") return { constraint: { type: "json" }, constraintParam: "response_format" };
  if (format?.type === "json_schema") return { constraint: { type: "json_schema", schema: format.schema }, constraintParam: "response_format.json_schema.schema" };
  return { constraint: undefined, constraintParam: null };
}
