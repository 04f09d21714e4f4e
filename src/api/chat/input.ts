import type { ChatMessage, ToolDefinition } from "../../serving/types.js";
import { InvalidRequest } from "../../errors.js";
import {
  chatRequestSchema,
  type ChatRequestBody,
  type WireMessage,
  type WirePrediction,
  type WireTool,
} from "../../protocol/chat-request.js";
import { parseRequest } from "../../protocol/parse-request.js";
import type { ChatInput } from "../../serving/types.js";

export function parseChatRequest(body: unknown): ChatRequestBody {
  return parseRequest(chatRequestSchema, body);
}

/** The sampling, stop, tier and `n` fields of chat completions and legacy completions, as the service takes them. */
export function sharedGenerationFields(
  body: Pick<
    ChatRequestBody,
    "temperature" | "top_p" | "presence_penalty" | "frequency_penalty" | "logit_bias" | "seed" | "stop" | "service_tier" | "n"
  >,
): Pick<ChatInput, "temperature" | "topP" | "presencePenalty" | "frequencyPenalty" | "logitBias" | "seed" | "stop" | "serviceTier" | "n"> {
  return {
    temperature: body.temperature ?? undefined,
    topP: body.top_p ?? undefined,
    presencePenalty: body.presence_penalty ?? undefined,
    frequencyPenalty: body.frequency_penalty ?? undefined,
    logitBias: body.logit_bias ? new Map(Object.entries(body.logit_bias).map(([token, bias]) => [Number(token), bias])) : undefined,
    seed: body.seed ?? undefined,
    stop: body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop,
    serviceTier: body.service_tier ?? undefined,
    n: body.n ?? 1,
  };
}

export function toChatInput(body: ChatRequestBody): ChatInput {
  const format = body.response_format;
  const choice = body.tool_choice;
  return {
    model: body.model,
    prompt: { kind: "chat", messages: body.messages.map(toChatMessage) },
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
    ...sharedGenerationFields(body),
    // top_k: -1 and 0 both mean no top-k truncation (vLLM uses -1, llama.cpp 0), even where the model's catalog defaults set one.
    topK: body.top_k == null ? undefined : Math.max(body.top_k, 0),
    minP: body.min_p ?? undefined,
    repetitionPenalty: body.repetition_penalty ?? undefined,
    logprobs: body.logprobs ? { top: body.top_logprobs ?? 0 } : undefined,
    responseFormat:
      format?.type === "json_object"
        ? { type: "json_object" }
        : format?.type === "json_schema"
          ? { type: "json_schema", schema: format.json_schema.schema }
          : undefined,
    tools: body.tools ? toToolDefinitions(body.tools) : undefined,
    toolChoice: choice == null ? undefined : typeof choice === "string" ? choice : { name: choice.function.name },
    ...(body.reasoning_effort ? { reasoningEffort: body.reasoning_effort } : {}),
    ...(body.prompt_cache_key != null ? { promptCacheKey: body.prompt_cache_key } : {}),
    ...(body.prediction ? { prediction: predictionText(body.prediction) } : {}),
    hasImages: body.messages.some((m) => Array.isArray(m.content) && m.content.some((part) => part.type === "image_url")),
  };
}

/** Wire tools as the service takes them: a tool without parameters takes an empty object. */
export function toToolDefinitions(tools: readonly WireTool[]): ToolDefinition[] {
  return tools.map((t) => ({
    name: t.function.name,
    ...(t.function.description !== undefined ? { description: t.function.description } : {}),
    parameters: t.function.parameters ?? { type: "object", properties: {} },
  }));
}

/** A prediction's text: its string, or its text parts joined with nothing between them. */
export function predictionText(prediction: WirePrediction): string {
  const content = prediction.content;
  return typeof content === "string" ? content : content.map((part) => part.text).join("");
}

export function toChatMessage(message: WireMessage, index: number): ChatMessage {
  const role = message.role === "developer" ? "system" : message.role;
  const content = message.content ?? "";
  const toolCalls = message.tool_calls?.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }));
  if (content === "" && role !== "assistant" && message.content == null) {
    throw new InvalidRequest(
      `Missing required parameter: 'messages[${index}].content'.`,
      `messages[${index}].content`,
      "missing_required_parameter",
    );
  }
  const text = typeof content === "string" ? content : content.map((part) => (part.type === "text" ? part.text : "")).join("");
  return {
    role,
    content: text,
    ...(role === "assistant" && toolCalls?.length ? { toolCalls } : {}),
    ...(role === "tool" && message.tool_call_id ? { toolCallId: message.tool_call_id } : {}),
  };
}
