/**
 * The request lifecycle, in three named steps: `admit` (admission.ts: model, checks, tier, prompts,
 * budget and limits) → `launch` (the backend's generations, and the wait for each to be admitted)
 * → the event pipeline (reasoning split, tool-call shaping, metering and settlement).
 */
import type { GenerationEvent, PauseControl } from "../protocol/generation.js";
import { newRequestId } from "../protocol/request-ids.js";
import { RateLimited } from "../errors.js";
import { admit, beside, type Admission, type AdmissionDeps, type Holdings } from "./admission.js";
import type { UsageLedger } from "../billing/ports.js";
import type { RequestObserver, RequestTrace, ServingMetrics } from "./ports.js";
import { admittedAttributes, tracedEvents, UNTRACED } from "./run-trace.js";
import { ReasoningSplitter } from "./reasoning-split.js";
import { splitReasoning } from "./reasoning-stream.js";
import { RequestMeter } from "./request-meter.js";
import { promptParam } from "./request-checks.js";
import { shapeChoice } from "./choice-shaping.js";
import { checkedChoice } from "./output-check.js";
import { meteredEvents, serverAbort, settlement } from "./metered-events.js";
import type { Caller, ChatInput, ChatRun, ChatService } from "./types.js";
import { canonicalId } from "./model-registry.js";
import { apiErrorOf } from "./backend-refusals.js";
import { errorCodeOf, recordUnserved } from "./unserved-row.js";

export interface ChatServiceDeps extends AdmissionDeps {
  ledger: UsageLedger;
  metrics?: ServingMetrics;
}

/** What launching found: the generations, each admitted by its backend, and what they found cached. */
interface Launch {
  generations: AsyncGenerator<GenerationEvent>[];
  queuedMs: number;
  /** Per prompt, the tokens every one of its choices found cached. */
  cachedByPrompt: number[];
}

const UNOBSERVED: RequestObserver = { admitted() {}, output() {}, preempted() {}, speculated() {}, finished() {} };

/** OpenAI's defaults for sampling when the caller sets none. */
const DEFAULT_TEMPERATURE = 1;
const DEFAULT_TOP_P = 1;

export function createChatService(deps: ChatServiceDeps): ChatService {
  return {
    async start(caller, input, signal, context = {}) {
      const api = context.api ?? "chat.completions";
      const requestId = context.requestId ?? newRequestId(api);
      const trace = context.trace ?? UNTRACED;
      const meterContext = {
        requestId,
        accountId: caller.accountId,
        keyId: caller.keyId,
        model: canonicalId(deps.registry, input.model),
        api,
        batchId: caller.batchId,
      };
      const meter = new RequestMeter(deps.ledger, meterContext, trace);
      const held: Holdings = { tier: "default", promptTokens: 0 };
      try {
        const admitting = trace.stage("switchyard.admission");
        const admission = await admit(deps, caller, input, meter, held).finally(() => admitting.end());
        const { model, tier } = admission;
        context.onAdmitted?.({ serviceTier: tier, systemFingerprint: model.systemFingerprint, rateLimits: admission.lease.state });
        trace.annotate(admittedAttributes({ api, requestedModel: input.model, model: model.entry.id, id: requestId, tier }));
        // Launched inside the request's span: a call to an upstream engine is its child and carries its traceparent.
        const queued = trace.stage("switchyard.queue");
        const launching = () => trace.within(() => launch(admission, caller, input, signal, context.output));
        const launched = await beside(admission.durable, launching, stopAll).finally(() => queued.end());
        return eventPipeline(admission, launched, { input, meter, held, signal, metrics: deps.metrics, trace });
      } catch (thrown) {
        throw await rejected(meter, held, signal, thrown);
      }
    },
  };
}

/**
 * Starts every choice's generation (each prompt's n choices together: the backend computes the
 * prompt once for them) and waits until the backend has admitted all of them.
 */
async function launch(
  admission: Admission,
  caller: Caller,
  input: ChatInput,
  signal: AbortSignal,
  output: PauseControl | undefined,
): Promise<Launch> {
  const { prompts, choicesPerPrompt: n, model } = admission;
  const choices = choiceSettings(admission, caller, input);
  const generations = prompts.flatMap((prompt) => model.backend.generate(prompt, choices, signal, output));
  try {
    const starts = await Promise.all(generations.map((g) => admitted(g, admission.output.constraintParam, promptParam(input))));
    // Each prompt is billed once; only what every one of its choices found cached counts as cached.
    const cachedByPrompt = prompts.map((_, p) => Math.min(...starts.slice(p * n, (p + 1) * n).map((s) => s.cachedTokens)));
    return { generations, queuedMs: Math.max(...starts.map((s) => s.queuedMs)), cachedByPrompt };
  } catch (error) {
    await stopAll({ generations });
    throw error;
  }
}

function stopAll(launched: Pick<Launch, "generations">): Promise<unknown> {
  return Promise.allSettled(launched.generations.map((g) => g.return(undefined)));
}

/** Each choice's settings; a seed gives choice i the seed + i. What the request leaves unset, the model's catalog defaults fill. */
function choiceSettings(admission: Admission, caller: Caller, input: ChatInput) {
  const defaults = admission.model.entry.sampling_defaults;
  return Array.from({ length: admission.choicesPerPrompt }, (_, index) => {
    const sampling = {
      temperature: input.temperature ?? defaults?.temperature ?? DEFAULT_TEMPERATURE,
      topP: input.topP ?? defaults?.top_p ?? DEFAULT_TOP_P,
      topK: input.topK ?? defaults?.top_k,
      minP: input.minP,
      presencePenalty: input.presencePenalty,
      frequencyPenalty: input.frequencyPenalty,
      repetitionPenalty: input.repetitionPenalty,
      logitBias: input.logitBias,
      seed: input.seed === undefined ? undefined : input.seed + index,
    };
    const { maxTokens, tier, output, prediction } = admission;
    return {
      maxTokens,
      sampling,
      stop: input.stop,
      logprobs: input.logprobs,
      constraint: output.constraint,
      tier,
      cacheNamespace: cacheNamespace(caller, input),
      account: caller.accountId,
      ...(prediction ? { prediction } : {}),
    };
  });
}

/** The launched generations as the run's events: reasoning split, tool calls shaped, metered and settled. */
function eventPipeline(
  admission: Admission,
  launched: Launch,
  run: { input: ChatInput; meter: RequestMeter; held: Holdings; signal: AbortSignal; metrics?: ServingMetrics; trace: RequestTrace },
): ChatRun {
  const { model, tier, prompts, choicesPerPrompt: n, output } = admission;
  const { meter, signal } = run;
  const cachedPromptTokens = launched.cachedByPrompt.reduce((a, b) => a + b, 0);
  meter.admitted(launched.queuedMs);
  // Metrics carry no account's name: a deployment is labelled with the catalog model it runs.
  const observer = run.metrics?.request(model.metricsModel ?? model.entry.id, tier) ?? UNOBSERVED;
  const promptTokens = prompts.reduce((sum, p) => sum + p.tokenCount, 0);
  observer.admitted(launched.queuedMs, promptTokens, cachedPromptTokens);
  const estimates = prompts.map((prompt, p) => ({ promptTokens: prompt.tokenCount, cachedTokens: launched.cachedByPrompt[p]! }));
  const settle = settlement(meter, { tier, estimates, choicesPerPrompt: n, prices: admission.prices, lease: admission.lease });
  const reasoning = !output.constraint && run.input.prompt.kind === "chat";
  const choices = launched.generations.map((generation, index) => {
    const splitter = new ReasoningSplitter({ enabled: reasoning, startsInReasoning: prompts[Math.floor(index / n)]!.opensThinking });
    const forced = output.shaping.mode === "forced" ? output.shaping.tools : [];
    const schema = output.constraint?.type === "json_schema" ? output.constraint.schema : undefined;
    return checkedChoice(shapeChoice(splitReasoning(index, generation, splitter), output.shaping), schema, forced);
  });
  const cover = (completionTokens: number) => meter.cover(completionTokens, cachedPromptTokens);
  const metered = meteredEvents(choices, {
    meter,
    settle,
    observer,
    cover,
    interruptedBy: () => serverAbort(signal),
    predictionTokens: admission.prediction?.tokenCount ?? 0,
  });
  run.trace.annotate({ "switchyard.queue_ms": Math.round(launched.queuedMs) });
  return {
    id: meter.context.requestId,
    created: Math.floor(Date.now() / 1000),
    // The name the request used: an alias is echoed, as the caller named the model.
    model: run.input.model,
    serviceTier: tier,
    systemFingerprint: model.systemFingerprint,
    rateLimits: admission.lease.state,
    events: run.trace === UNTRACED ? metered : tracedEvents(metered, run.trace, choices.length),
    undelivered: (errorCode) => meter.undelivered(errorCode),
  };
}

/** A request refused before its output began: what it held is released, and its row says why. */
async function rejected(meter: RequestMeter, held: Holdings, signal: AbortSignal, thrown: unknown): Promise<unknown> {
  // Aborted by a shutdown while waiting for a sequence: that, not what the abort broke, is the answer.
  const error = serverAbort(signal) ?? thrown;
  const expired = error instanceof RateLimited && error.code === "resource_unavailable";
  await recordUnserved(meter, held, { status: expired ? "expired" : "rejected", errorCode: errorCodeOf(error) });
  return error;
}

/** Cached prefixes are never shared across accounts; `prompt_cache_key` narrows them further within one. */
function cacheNamespace(caller: Caller, input: ChatInput): string {
  return input.promptCacheKey === undefined ? caller.accountId : JSON.stringify([caller.accountId, input.promptCacheKey]);
}

/**
 * Waits for admission (the `started` event). A full queue is a 429 `queue_full`; a flex request that
 * found no spare capacity in time a 429 `resource_unavailable`, not billed.
 */
async function admitted(
  generation: AsyncGenerator<GenerationEvent>,
  constraintParam: string | null,
  promptParam: string,
): Promise<{ queuedMs: number; cachedTokens: number }> {
  try {
    const first = await generation.next();
    if (first.done || first.value.type !== "started") throw new Error("The backend did not start the generation.");
    return first.value;
  } catch (error) {
    throw apiErrorOf(error, { promptParam, constraintParam });
  }
}
