import { randomBytes } from "node:crypto";
import type { OutputConstraint, ToolCall, ToolDefinition } from "../protocol/generation.js";

export type ToolChoice = "none" | "auto" | "required" | { name: string };

/**
 * The grammar a forced or required call is held to: one JSON object `{"name", "arguments"}` whose
 * name is one of the allowed tools and whose arguments follow that tool's parameter schema.
 */
export function toolCallConstraint(tools: readonly ToolDefinition[]): OutputConstraint {
  return { type: "tool_call", tools };
}

export function toolCallId(): string {
  return `call_${randomBytes(12).toString("base64url")}`;
}

/**
 * Reads tool calls out of a completion's text. Accepted shapes, after trimming and removing an
 * optional ```json fence or <tool_call>...</tool_call> wrapper: one JSON object
 * `{"name": TOOL, "arguments": {...}}` (`parameters` is accepted for `arguments`), or a JSON array
 * of them. Every name must be one of the tools offered; otherwise the text is not a call.
 */
export function parseToolCalls(text: string, tools: readonly ToolDefinition[]): ToolCall[] | null {
  let body = text.trim();
  body = body.replace(/^<tool_call>\s*/u, "").replace(/\s*<\/tool_call>$/u, "");
  body = body
    .replace(/^```(?:json)?\s*/u, "")
    .replace(/\s*```$/u, "")
    .trim();
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return null;
  }
  const items = Array.isArray(value) ? value : [value];
  if (items.length === 0) return null;
  const calls: ToolCall[] = [];
  for (const item of items) {
    if (typeof item !== "object" || item === null) return null;
    const { name, arguments: args, parameters } = item as Record<string, unknown>;
    const argsValue = args ?? parameters ?? {};
    if (typeof name !== "string" || !tools.some((t) => t.name === name)) return null;
    if (typeof argsValue !== "object" || argsValue === null || Array.isArray(argsValue)) return null;
    const argumentsText = stringifiedOrNull(argsValue);
    if (argumentsText === null) return null;
    calls.push({ id: toolCallId(), name, arguments: argumentsText });
  }
  return calls;
}

/**
 * A forced call cut off by max_tokens: the grammar emits `{"name": ..., "arguments": ...}` in that
 * order, so the text so far names the tool and holds the start of its arguments. Returned as a call
 * whose `arguments` is that partial text, as OpenAI returns it with finish_reason "length". Null when
 * the cut came before the name was settled (no tool, or more than one, starts with what was written).
 */
export function partialToolCall(text: string, tools: readonly ToolDefinition[]): ToolCall[] | null {
  const complete = parseToolCalls(text, tools);
  if (complete) return complete;
  const match = /^\s*\{\s*"name"\s*:\s*"([^"\\]*)(")?/u.exec(text);
  if (!match) return null;
  const [head, written, closed] = match;
  const candidates = tools.filter((t) => (closed ? t.name === written : t.name.startsWith(written!)));
  if (candidates.length !== 1) return null;
  const args = closed ? /^\s*,\s*"arguments"\s*:\s*/u.exec(text.slice(head.length)) : null;
  const argumentsText = args ? text.slice(head.length + args[0].length) : "";
  return [{ id: toolCallId(), name: candidates[0]!.name, arguments: argumentsText }];
}

/** Whether text that starts like this may turn out to be a tool call in `auto` mode (so it is held back). */
export function mayBeToolCall(prefix: string): boolean {
  const start = prefix.trimStart();
  if (start.length === 0) return true;
  return ["{", "[", "<tool_call>", "```"].some((opening) => start.startsWith(opening) || opening.startsWith(start));
}

/**
 * Generated text is not bounded by the body parser's depth limit: arguments nested past what
 * JSON.stringify's recursion takes (a few thousand levels) are no call, and the text stays content.
 */
function stringifiedOrNull(value: object): string | null {
  try {
    return JSON.stringify(value);
  } catch {
    return null;
  }
}
