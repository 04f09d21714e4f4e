import { InvalidRequest } from "../../errors.js";
import type { ChatMessage } from "../../serving/types.js";
import type { ResponsesInputItem, ResponsesRequestBody } from "../../protocol/responses-request.js";
import type { ChatInput } from "../../serving/types.js";

const partsText = (content: string | Array<{ text: string }>) =>
  typeof content === "string" ? content : content.map((p) => p.text).join("");

/**
 * Input items as chat messages: message items become turns (`developer` is `system`), consecutive
 * `function_call` items join the assistant turn before them, each `function_call_output` is a
 * `tool` message answering its `call_id`. Reasoning items are dropped, as chat drops thinking.
 */
export function itemsToMessages(input: string | ResponsesInputItem[]): ChatMessage[] {
  if (typeof input === "string") return [{ role: "user", content: input }];
  const messages: ChatMessage[] = [];
  for (const item of input) {
    if (item.type === "reasoning") continue;
    if (item.type === "function_call") {
      const call = { id: item.call_id, name: item.name, arguments: item.arguments };
      const last = messages.at(-1);
      if (last?.role === "assistant") (last.toolCalls ??= []).push(call);
      else messages.push({ role: "assistant", content: "", toolCalls: [call] });
    } else if (item.type === "function_call_output") {
      messages.push({ role: "tool", content: partsText(item.output), toolCallId: item.call_id });
    } else if ("role" in item) {
      messages.push({ role: item.role === "developer" ? "system" : item.role, content: partsText(item.content) });
    }
  }
  return messages;
}

/**
 * The Responses request as the chat lifecycle's input. `conversation` is what a later
 * `previous_response_id` continues from: the earlier conversation and this input, without the
 * instructions (which, as OpenAI has it, do not carry over).
 */
/** Chat's parameters as the Responses API calls them, so its errors name what the caller sent. */
const RESPONSES_PARAMS = { messages: "input", response_format: "text.format", "response_format.json_schema.schema": "text.format.schema" };

export function toResponsesChatInput(
  body: ResponsesRequestBody,
  earlier: readonly ChatMessage[],
): { input: ChatInput; conversation: ChatMessage[] } {
  checkCallOutputs(body.input, earlier);
  const conversation = [...earlier, ...itemsToMessages(body.input)];
  const messages: ChatMessage[] = body.instructions ? [{ role: "system", content: body.instructions }, ...conversation] : conversation;
  const format = body.text?.format;
  const choice = body.tool_choice;
  const input: ChatInput = {
    model: body.model,
    prompt: { kind: "chat", messages },
    maxTokens: body.max_output_tokens ?? undefined,
    temperature: body.temperature ?? undefined,
    topP: body.top_p ?? undefined,
    stop: [],
    n: 1,
    serviceTier: body.service_tier ?? undefined,
    responseFormat:
      format?.type === "json_object"
        ? { type: "json_object" }
        : format?.type === "json_schema"
          ? { type: "json_schema", schema: format.schema }
          : undefined,
    tools: body.tools?.map((t) => ({
      name: t.name,
      ...(t.description != null ? { description: t.description } : {}),
      parameters: t.parameters ?? { type: "object", properties: {} },
    })),
    toolChoice: choice == null ? undefined : typeof choice === "string" ? choice : { name: choice.name },
    ...(body.reasoning?.effort ? { reasoningEffort: body.reasoning.effort } : {}),
    ...(body.prompt_cache_key != null ? { promptCacheKey: body.prompt_cache_key } : {}),
    paramNames: RESPONSES_PARAMS,
  };
  return { input, conversation };
}

/**
 * Each `function_call_output` answers a call made before it, in this input or in the conversation
 * `previous_response_id` continues; one that answers none is a 400 naming it, as OpenAI's is (the
 * model would be shown a tool result for a call it never made).
 */
function checkCallOutputs(input: string | ResponsesInputItem[], earlier: readonly ChatMessage[]): void {
  if (typeof input === "string") return;
  const calls = new Set(earlier.flatMap((message) => message.toolCalls?.map((call) => call.id) ?? []));
  input.forEach((item, index) => {
    if (item.type === "function_call") calls.add(item.call_id);
    if (item.type === "function_call_output" && !calls.has(item.call_id)) {
      const shown = item.call_id.length > 64 ? `${item.call_id.slice(0, 64)}...` : item.call_id;
      throw new InvalidRequest(
        `No tool call found for function call output with call_id '${shown}'.`,
        `input[${index}].call_id`,
        "invalid_value",
      );
    }
  });
}
