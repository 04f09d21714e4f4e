import type { ResponsesInputItem } from "../../protocol/responses-request.js";
import type { StoredResponse } from "./response-store.js";
import { itemId } from "./response-builder.js";

/** An input item as `GET /v1/responses/{id}/input_items` lists it: with an id and a status. */
export type WireInputItem = { id: string; type: string } & Record<string, unknown>;

const textParts = (content: string | Array<{ type: string; text: string }>, role: string) =>
  typeof content === "string"
    ? [{ type: role === "assistant" ? "output_text" : "input_text", text: content }]
    : content.map((p) => ({ type: p.type === "text" ? "input_text" : p.type, text: p.text }));

/** The request's input as OpenAI lists it: a string is one user message; every item gets an id. */
export function toInputItems(input: string | ResponsesInputItem[]): WireInputItem[] {
  if (typeof input === "string")
    return [{ id: itemId("msg"), type: "message", role: "user", status: "completed", content: textParts(input, "user") }];
  return input.map((item): WireInputItem => {
    if (item.type === "function_call")
      return {
        id: item.id ?? itemId("fc"),
        type: "function_call",
        status: "completed",
        call_id: item.call_id,
        name: item.name,
        arguments: item.arguments,
      };
    if (item.type === "function_call_output")
      return {
        id: item.id ?? itemId("fco"),
        type: "function_call_output",
        status: "completed",
        call_id: item.call_id,
        output: item.output,
      };
    if (item.type === "reasoning") return { ...item, id: typeof item.id === "string" ? item.id : itemId("rs"), type: "reasoning" };
    return {
      id: item.id ?? itemId("msg"),
      type: "message",
      role: item.role,
      status: "completed",
      content: textParts(item.content, item.role),
    };
  });
}

/**
 * Everything a response was generated from, oldest first, as OpenAI lists it: with
 * `previous_response_id`, the earlier response's own input items and its output first.
 */
export function chainedInputItems(earlier: StoredResponse | null, input: string | ResponsesInputItem[]): WireInputItem[] {
  const before = earlier ? [...earlier.inputItems, ...((JSON.parse(earlier.body) as { output?: WireInputItem[] }).output ?? [])] : [];
  return [...before, ...toInputItems(input)];
}
