/**
 * What serving tells a request's trace: its GenAI attributes (OpenTelemetry's semantic conventions)
 * and the stages after admission, read off the events the run already yields (the engine knows
 * nothing of tracing). Counts, names and ids only: never a key, a prompt or a completion's text.
 */
import type { ApiKind } from "../protocol/request-ids.js";
import type { ServiceTier } from "../protocol/tiers.js";
import type { RequestTrace, TraceAttributes, TraceStage } from "./ports.js";
import type { ServingEvent, Usage } from "./types.js";

const NO_STAGE: TraceStage = { end() {} };

/** Tracing off: nothing is recorded, and the run's events are not wrapped. */
export const UNTRACED: RequestTrace = { annotate() {}, stage: () => NO_STAGE, within: (work) => work() };

/** The GenAI conventions' `gen_ai.operation.name` of an API. */
export function operationName(api: ApiKind): "chat" | "text_completion" | "embeddings" {
  if (api === "embeddings") return "embeddings";
  return api === "completions" ? "text_completion" : "chat";
}

/** What is known once a request is admitted: which model serves it, at which tier, under which id. */
export function admittedAttributes(run: { api: ApiKind; requestedModel: string; model: string; id: string; tier: ServiceTier }) {
  return {
    "gen_ai.operation.name": operationName(run.api),
    "gen_ai.request.model": run.requestedModel,
    "gen_ai.response.model": run.model,
    "gen_ai.response.id": run.id,
    "switchyard.service_tier": run.tier,
  } satisfies TraceAttributes;
}

/** The bill: tokens as the response's `usage` counts them, and its exact cost as a decimal string. */
export function usageAttributes(usage: Pick<Usage, "promptTokens" | "cachedPromptTokens" | "completionTokens" | "cost">) {
  return {
    "gen_ai.usage.input_tokens": usage.promptTokens,
    "gen_ai.usage.output_tokens": usage.completionTokens,
    "gen_ai.usage.cache_read.input_tokens": usage.cachedPromptTokens,
    "switchyard.usage.estimated_cost": usage.cost,
  } satisfies TraceAttributes;
}

/**
 * The run's events, unchanged, traced: prefill from admission (the engine's `started`) to the first
 * output, decode from there to the last choice's finish; the finish reasons and the usage go on the
 * request's span when the run is done. A run that ends early ends the stages it had open.
 */
export async function* tracedEvents(
  events: AsyncGenerator<ServingEvent>,
  trace: RequestTrace,
  choices: number,
): AsyncGenerator<ServingEvent> {
  let prefill: TraceStage | null = trace.stage("switchyard.prefill");
  let decode: TraceStage | null = null;
  const finishReasons: string[] = [];
  try {
    for await (const event of events) {
      if (event.type !== "done" && prefill) {
        prefill.end();
        prefill = null;
        if (event.type !== "finish") decode = trace.stage("switchyard.decode");
      }
      if (event.type === "finish") {
        finishReasons.push(event.finishReason);
        if (finishReasons.length === choices) {
          decode?.end();
          decode = null;
        }
      }
      if (event.type === "done") trace.annotate({ ...usageAttributes(event.usage), "gen_ai.response.finish_reasons": finishReasons });
      yield event;
    }
  } finally {
    prefill?.end();
    decode?.end();
  }
}
