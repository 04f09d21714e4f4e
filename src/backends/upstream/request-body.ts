import { createHash } from "node:crypto";
import type { ChatMessage, OutputConstraint, ToolDefinition } from "../../protocol/generation.js";
import type { PerTier, ServiceTier } from "../../protocol/tiers.js";
import type { GenerationParams } from "../backend.js";
import type { UpstreamPrompt } from "./prompt.js";

/** An upstream knows no batch tier: a Batch API line asks it for flex, the cheapest it has. */
const upstreamTier = (tier: ServiceTier): string => (tier === "batch" ? "flex" : tier);
/** vLLM's `priority`: lower runs earlier. */
const VLLM_PRIORITY: PerTier<number> = { priority: -1, default: 0, flex: 1, batch: 2 };

export interface BodyOptions {
  /** The model name the upstream serves. */
  model: string;
  /** Send vLLM's `priority` (only vLLM started with `--scheduling-policy priority` accepts a non-zero one). */
  sendPriority: boolean;
}

/**
 * One choice's request to an OpenAI-compatible upstream: always a stream with usage, so the bill
 * comes from the engine's own token counts. The prefix-cache namespace travels as an opaque
 * `prompt_cache_key` (a hash), so a Switchyard worker keeps accounts' cached prompts apart.
 */
export function requestBody(prompt: UpstreamPrompt, params: GenerationParams, options: BodyOptions): Record<string, unknown> {
  const s = params.sampling;
  const tier = params.tier ?? "default";
  const body: Record<string, unknown> = {
    model: options.model,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: params.maxTokens,
    temperature: s.temperature,
    top_p: s.topP,
    ...(s.topK ? { top_k: s.topK } : {}),
    ...(s.minP ? { min_p: s.minP } : {}),
    ...(s.seed !== undefined ? { seed: s.seed } : {}),
    ...(s.presencePenalty ? { presence_penalty: s.presencePenalty } : {}),
    ...(s.frequencyPenalty ? { frequency_penalty: s.frequencyPenalty } : {}),
    ...(s.repetitionPenalty !== undefined && s.repetitionPenalty !== 1 ? { repetition_penalty: s.repetitionPenalty } : {}),
    ...(s.logitBias?.size ? { logit_bias: Object.fromEntries(s.logitBias) } : {}),
    ...(params.stop.length > 0 ? { stop: params.stop } : {}),
    ...(params.logprobs
      ? prompt.kind === "chat"
        ? { logprobs: true, top_logprobs: params.logprobs.top }
        : { logprobs: params.logprobs.top }
      : {}),
    service_tier: upstreamTier(tier),
    ...(options.sendPriority ? { priority: VLLM_PRIORITY[tier] } : {}),
    ...(params.cacheNamespace !== undefined ? { prompt_cache_key: opaqueCacheKey(params.cacheNamespace) } : {}),
    ...(params.prediction ? { prediction: { type: "content", content: params.prediction.text } } : {}),
  };
  if (prompt.kind === "text") return { ...body, prompt: prompt.text };
  return {
    ...body,
    messages: prompt.messages.map(wireMessage),
    ...toolFields(prompt.tools, params.constraint),
    ...responseFormat(params.constraint),
    // Qwen3-style templates read the kwarg (vLLM, SGLang, llama-server); a Switchyard worker reads reasoning_effort.
    ...(prompt.options.thinking === false ? { chat_template_kwargs: { enable_thinking: false }, reasoning_effort: "none" } : {}),
  };
}

/** Hashing keeps account ids out of the upstream's logs while keeping namespaces apart. */
export function opaqueCacheKey(namespace: string): string {
  return `sy-${createHash("sha256").update(namespace).digest("hex").slice(0, 32)}`;
}

function wireMessage(m: ChatMessage): Record<string, unknown> {
  return {
    role: m.role,
    content: m.toolCalls?.length && m.content === "" ? null : m.content,
    ...(m.toolCalls?.length
      ? { tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })) }
      : {}),
    ...(m.toolCallId !== undefined ? { tool_call_id: m.toolCallId } : {}),
  };
}

const wireTool = (t: ToolDefinition) => ({
  type: "function",
  function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.parameters },
});

/** Offered tools go up in `auto` mode; a forced call becomes `required` or the named tool. */
function toolFields(offered: readonly ToolDefinition[], constraint: OutputConstraint | undefined): Record<string, unknown> {
  if (constraint?.type === "tool_call") {
    const forced = constraint.tools;
    const choice = forced.length === 1 ? { type: "function", function: { name: forced[0]!.name } } : "required";
    return { tools: forced.map(wireTool), tool_choice: choice };
  }
  return offered.length > 0 ? { tools: offered.map(wireTool), tool_choice: "auto" } : {};
}

function responseFormat(constraint: OutputConstraint | undefined): Record<string, unknown> {
  if (constraint?.type === "json") return { response_format: { type: "json_object" } };
  if (constraint?.type === "json_schema")
    return { response_format: { type: "json_schema", json_schema: { name: "response", schema: constraint.schema, strict: true } } };
  return {};
}
