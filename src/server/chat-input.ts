import type { z } from "zod";
import type { ChatMessage } from "../engine/types.js";
import { InvalidRequest } from "../errors.js";
import { chatRequestSchema, type ChatRequestBody, type WireMessage } from "../protocol/chat-request.js";
import type { ChatInput } from "../serving/chat-service.js";

/** Validates the wire body; the first problem becomes a 400 naming its `param`. */
export function parseChatRequest(body: unknown): ChatRequestBody {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new InvalidRequest("The request body must be a JSON object.");
  }
  const parsed = chatRequestSchema.safeParse(body);
  if (!parsed.success) throw invalidFrom(parsed.error);
  return parsed.data;
}

function invalidFrom(error: z.ZodError): InvalidRequest {
  const issue = error.issues[0]!;
  const param = formatPath(issue.path);
  const missing = issue.code === "invalid_type" && issue.input === undefined;
  const message = missing ? `Missing required parameter: '${param}'.` : `Invalid '${param}': ${issue.message}`;
  return new InvalidRequest(message, param || null, missing ? "missing_required_parameter" : "invalid_value");
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((out, key) => (typeof key === "number" ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)), "");
}

export function toChatInput(body: ChatRequestBody): ChatInput {
  return {
    model: body.model,
    messages: body.messages.map(toChatMessage),
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
    temperature: body.temperature ?? undefined,
    topP: body.top_p ?? undefined,
    seed: body.seed ?? undefined,
    stop: body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop,
    serviceTier: body.service_tier ?? undefined,
  };
}

function toChatMessage(message: WireMessage, index: number): ChatMessage {
  const role = message.role === "developer" ? "system" : message.role;
  const content = message.content ?? "";
  if (content === "" && role !== "assistant" && message.content == null) {
    throw new InvalidRequest(`Missing required parameter: 'messages[${index}].content'.`, `messages[${index}].content`, "missing_required_parameter");
  }
  return { role, content: typeof content === "string" ? content : content.map((part) => part.text).join("") };
}
