/**
 * Admission, the first step of a request's lifecycle: which model serves it and at which tier and
 * prices, what its output must look like, its prompts prepared, and its budget and limits reserved.
 * Every refusal happens here or while the backend admits the generations (see chat-service.ts).
 */
import type { Backend, PreparedPrediction, PreparedPrompt } from "../backends/backend.js";
import { requestCost } from "../billing/cost.js";
import { servedTier } from "../billing/prices.js";
import type { CatalogEntry, TokenPrices } from "../catalog/types.js";
import type { ServiceTier } from "../protocol/tiers.js";
import type { OutputConstraint, PromptOptions, ToolDefinition } from "../protocol/generation.js";
import { CapacityUnavailable } from "../errors.js";
import type { ModelRegistry } from "./model-registry.js";
import { requireServedModel } from "./served-model.js";
import type { InFlightLedger, SpendBudgets } from "../billing/ports.js";
import type { LimitLease, RequestLimits } from "../limits/ports.js";
import type { RequestMeter } from "./request-meter.js";
import {
  checkCapabilities,
  checkCheapContextBound,
  checkChoiceCount,
  checkPredictionLength,
  completionBudget,
  outputConstraint,
  promptParam,
} from "./request-checks.js";
import { checkSchemas } from "./schema-check.js";
import type { ToolShaping } from "./choice-shaping.js";
import type { ToolChoice } from "./tool-calls.js";
import type { Caller, ChatInput } from "./types.js";
import { apiErrorOf } from "./backend-refusals.js";

export interface AdmissionDeps {
  registry: ModelRegistry;
  limits: RequestLimits;
  budgets: SpendBudgets;
  inFlight?: InFlightLedger;
}

/** A model that can take the request now, and how it is named in metrics. */
export interface ReadyModel {
  entry: CatalogEntry;
  backend: Backend;
  systemFingerprint: string;
  metricsModel?: string;
}

/** What the output must look like: a grammar, tool-call shaping, and whether the model may think. */
export interface OutputPlan {
  constraint: OutputConstraint | undefined;
  /** The parameter a rejected constraint is blamed on. */
  constraintParam: string | null;
  shaping: ToolShaping;
  /** The tools the prompt offers the model. */
  offered: readonly ToolDefinition[];
  thinking: false | undefined;
}

/** What a request holds while it is admitted, so a refusal at any point releases it and records its row. */
export interface Holdings {
  tier: ServiceTier;
  promptTokens: number;
  lease?: LimitLease;
}

/** An admitted request: everything launching its generations and billing them needs. */
export interface Admission {
  model: ReadyModel;
  tier: ServiceTier;
  prices: TokenPrices;
  output: OutputPlan;
  prompts: PreparedPrompt[];
  /** The request's prediction, ready for each choice's generation; absent: none (or an empty one). */
  prediction?: PreparedPrediction;
  choicesPerPrompt: number;
  /** Every choice's completion budget. */
  maxTokens: number;
  lease: LimitLease;
  /**
   * The request's in-flight row and budget reservation, written beside the launch for a key without
   * a budget (nothing there can refuse it), already written for one with a budget. No output goes
   * out before it has settled (`beside`). The request's final ledger row charges the reservation.
   */
  durable: Promise<void>;
}

export async function admit(
  deps: AdmissionDeps,
  caller: Caller,
  input: ChatInput,
  meter: RequestMeter,
  held: Holdings,
): Promise<Admission> {
  const model = readyModel(deps.registry, caller, input.model);
  const { entry, backend } = model;
  checkCapabilities(entry, backend, input);
  checkCheapContextBound(entry, backend, input);
  const { tier, prices } = servedTier(entry.pricing, input.serviceTier, Boolean(caller.batchId));
  held.tier = tier;
  const output = planOutput(input);
  // Prompt workers are shared fairly between accounts.
  const prompts = await preparePrompts(backend, input, output, caller.accountId);
  held.promptTokens = prompts.reduce((sum, p) => sum + p.tokenCount, 0);
  const choicesPerPrompt = input.n ?? 1;
  const choiceCount = choicesPerPrompt * prompts.length;
  checkChoiceCount(backend, choiceCount, input);
  const maxTokens = Math.min(...prompts.map((prompt) => completionBudget(entry, backend, prompt, input)));
  const prediction = await preparePrediction(entry, backend, input, prompts, caller.accountId);
  // Rejected prediction tokens are billed as completion tokens: each choice may reject up to the whole prediction.
  const maxCompletionTokens = (maxTokens + (prediction?.tokenCount ?? 0)) * choiceCount;
  const { durable } = await reserve(deps, caller, meter, held, { model: entry.id, prices, maxCompletionTokens });
  return {
    model,
    tier: held.tier,
    prices,
    output,
    prompts,
    ...(prediction ? { prediction } : {}),
    choicesPerPrompt,
    maxTokens,
    lease: held.lease!,
    durable,
  };
}

interface Reserving {
  model: string;
  prices: TokenPrices;
  maxCompletionTokens: number;
}

/**
 * A key with a budget reserves it before the rate and concurrency limits are consulted, so a
 * request that cannot be paid for never takes a slot from one that can. A key without one cannot
 * be refused there: its limits are taken first and its rows are written while it launches, so
 * the database's commits (a WAL flush each on PostgreSQL) overlap the prompt's evaluation instead
 * of preceding it (`beside`). Every choice may use max_tokens. Chat and embeddings both admit here.
 */
export async function reserve(
  deps: Pick<AdmissionDeps, "limits" | "budgets" | "inFlight">,
  caller: Caller,
  meter: RequestMeter,
  held: Holdings,
  request: Reserving,
): Promise<{ durable: Promise<void> }> {
  if (caller.limits.budgetUsd === null) {
    await takeLimits(deps, caller, held, request);
    const durable = holdBudget(deps, caller, meter, held, request);
    durable.catch(() => {}); // awaited beside the launch; a failure is thrown there
    return { durable }; // in an object: an async function would wait for a promise it returns
  }
  await holdBudget(deps, caller, meter, held, request);
  await takeLimits(deps, caller, held, request);
  return { durable: Promise.resolve() };
}

/**
 * Admission of a request whose answer goes out whole, at the end (an embedding). A key with a
 * budget reserves as `reserve` does. One without writes nothing before the work: no output leaves
 * before the request's final row is written, so that row alone bills it (`unreserved`: it charges
 * the key's spend as it goes in). One statement a request instead of two, none of it beside the
 * work, and a crash before the answer bills nothing, as nothing was delivered.
 */
export async function reserveWhole(
  deps: Pick<AdmissionDeps, "limits" | "budgets" | "inFlight">,
  caller: Caller,
  meter: RequestMeter,
  held: Holdings,
  request: Reserving,
): Promise<{ durable: Promise<void>; unreserved: boolean }> {
  if (caller.limits.budgetUsd !== null) return { ...(await reserve(deps, caller, meter, held, request)), unreserved: false };
  await takeLimits(deps, caller, held, request);
  return { durable: Promise.resolve(), unreserved: true };
}

/** The key's rate and concurrency limits, for the prompt and every completion token it may use. */
async function takeLimits(deps: Pick<AdmissionDeps, "limits">, caller: Caller, held: Holdings, request: Reserving): Promise<void> {
  held.lease = await deps.limits.admit({
    accountId: caller.accountId,
    keyId: caller.keyId,
    model: request.model,
    estimatedTokens: held.promptTokens + request.maxCompletionTokens,
    limits: caller.limits,
  });
}

/**
 * Runs the work while the request's rows are written (see `reserve`): its result, and with it any
 * output, waits for both. Rows that could not be written undo the work already started.
 */
export async function beside<T>(durable: Promise<void>, start: () => Promise<T>, undo: (started: T) => Promise<unknown>): Promise<T> {
  const [written, started] = await Promise.allSettled([durable, start()]);
  if (written.status === "rejected") {
    if (started.status === "fulfilled") await undo(started.value);
    throw written.reason;
  }
  if (started.status === "rejected") throw started.reason;
  return started.value;
}

/**
 * The in-flight row first, so a crash from here on is billed and its reservation released; then the
 * reservation. A key without a budget reserves in the row's own write (nothing to check); one with
 * a budget (or given one since its key was read) is checked by the budgets.
 */
async function holdBudget(
  deps: Pick<AdmissionDeps, "budgets" | "inFlight">,
  caller: Caller,
  meter: RequestMeter,
  held: Holdings,
  request: Reserving,
): Promise<void> {
  const { promptTokens, tier } = held;
  const worstCase = requestCost(request.prices, { promptTokens, cachedPromptTokens: 0, completionTokens: request.maxCompletionTokens });
  // Unbudgeted: reserved in the row's own write, which `reserve` runs beside the launch.
  const unbudgeted = caller.limits.budgetUsd === null;
  const reserveUsd = unbudgeted ? worstCase : undefined;
  if (
    await meter.begin(deps.inFlight, {
      serviceTier: tier,
      promptTokens,
      prices: request.prices,
      maxCompletionTokens: request.maxCompletionTokens,
      reserveUsd,
      besideLaunch: unbudgeted,
    })
  )
    return;
  await deps.budgets.reserve({ keyId: caller.keyId, requestId: meter.context.requestId, amountUsd: worstCase });
}

/** Tool choice, schemas and response format decide the output's grammar and how tool calls are found. */
export function planOutput(input: ChatInput): OutputPlan {
  const toolChoice: ToolChoice = input.tools?.length ? (input.toolChoice ?? "auto") : "none";
  const offered = toolChoice === "none" ? [] : (input.tools ?? []);
  const forced =
    toolChoice === "required" ? offered : typeof toolChoice === "object" ? offered.filter((t) => t.name === toolChoice.name) : [];
  checkSchemas(input, forced);
  const { constraint, constraintParam } = outputConstraint(input, forced);
  const shaping: ToolShaping =
    forced.length > 0 ? { mode: "forced", tools: forced } : toolChoice === "auto" ? { mode: "auto", tools: offered } : { mode: "none" };
  // Grammar-bound output cannot hold a think block, so the model is asked not to think.
  const thinking = input.reasoningEffort === "none" || constraint ? false : undefined;
  return { constraint, constraintParam, shaping, offered, thinking };
}

async function preparePrompts(backend: Backend, input: ChatInput, output: OutputPlan, fairnessKey: string): Promise<PreparedPrompt[]> {
  const prompt = input.prompt;
  if (prompt.kind === "text") return Promise.all(prompt.texts.map((text) => backend.prepareText(text, { fairnessKey })));
  const options: PromptOptions = { thinking: output.thinking, fairnessKey };
  try {
    return [await backend.prepare(prompt.messages, output.offered, options)];
  } catch (error) {
    throw apiErrorOf(error, { promptParam: promptParam(input) });
  }
}

/**
 * A chat request's prediction, checked against the room its prompt leaves in the context window:
 * first by a lower bound of its tokens (tokenizing a huge one costs time), then by its tokens.
 * An empty prediction drafts nothing and is none.
 */
async function preparePrediction(
  entry: CatalogEntry,
  backend: Backend,
  input: ChatInput,
  prompts: readonly PreparedPrompt[],
  fairnessKey: string,
): Promise<PreparedPrediction | undefined> {
  const text = input.prediction;
  const prompt = prompts[0];
  if (!text || !backend.preparePrediction || input.prompt.kind !== "chat" || !prompt) return undefined;
  checkPredictionLength(entry, backend, prompt, { tokenCount: backend.minimumTextTokens?.(text) ?? 0 }, true);
  const prediction = await backend.preparePrediction(text, { fairnessKey });
  checkPredictionLength(entry, backend, prompt, prediction);
  return prediction;
}

export function readyModel(registry: ModelRegistry, caller: Caller, id: string): ReadyModel {
  const served = requireServedModel(registry, caller, id, "chat");
  if (!served.backend) throw new CapacityUnavailable(`The model '${id}' is still loading; retry shortly.`, 5);
  return {
    entry: served.entry,
    backend: served.backend,
    systemFingerprint: served.systemFingerprint ?? "fp_unknown",
    // Metrics are public: a private model's own id would name its account.
    metricsModel: served.dedicated
      ? `${served.dedicated.baseModel} (dedicated)`
      : served.upload && `${served.upload.baseModel} (uploaded adapter)`,
  };
}
