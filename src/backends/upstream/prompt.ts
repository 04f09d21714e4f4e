import type { ChatMessage, PromptOptions, ToolDefinition } from "../../protocol/generation.js";
import type { PreparedPrompt } from "../backend.js";

/**
 * A prompt for an upstream engine: the conversation itself (the engine renders and tokenizes it),
 * with an upper bound of its token count for budgets and limits.
 */
export type UpstreamPrompt = PreparedPrompt & {
  tokenCountIsUpperBound: true;
  /** What routes the prompt to a replica whose prefix cache may hold its start (see affinity.ts). */
  prefix: string;
} & (
    | { kind: "chat"; messages: readonly ChatMessage[]; tools: readonly ToolDefinition[]; options: PromptOptions }
    | { kind: "text"; text: string }
  );

/**
 * Every token of a byte-level BPE vocabulary spells at least one byte, except the chat template's
 * special tokens: a per-message allowance covers the role markers, a fixed one a template's default
 * system prompt, and tools get room for a template's tool instructions.
 */
const PER_MESSAGE_TOKENS = 16;
const FIXED_TOKENS = 64;
const TOOLS_TOKENS = 512;

/** The first characters of a conversation that decide its replica: about 256 tokens. */
export const AFFINITY_PREFIX_CHARS = 1024;

const bytes = (text: string) => Buffer.byteLength(text, "utf8");

export function chatPrompt(messages: readonly ChatMessage[], tools: readonly ToolDefinition[], options: PromptOptions): UpstreamPrompt {
  const toolsJson = tools.length > 0 ? JSON.stringify(tools) : "";
  let count = FIXED_TOKENS + (tools.length > 0 ? TOOLS_TOKENS + bytes(toolsJson) : 0);
  for (const m of messages) {
    count += PER_MESSAGE_TOKENS + bytes(m.content);
    for (const call of m.toolCalls ?? []) count += PER_MESSAGE_TOKENS + bytes(call.name) + bytes(call.arguments);
  }
  return {
    kind: "chat",
    messages,
    tools,
    options,
    tokenCount: count,
    tokenCountIsUpperBound: true,
    opensThinking: false,
    prefix: affinityPrefix(messages, toolsJson),
  };
}

export function textPrompt(text: string): UpstreamPrompt {
  return {
    kind: "text",
    text,
    tokenCount: FIXED_TOKENS + bytes(text),
    tokenCountIsUpperBound: true,
    opensThinking: false,
    prefix: text.slice(0, AFFINITY_PREFIX_CHARS),
  };
}

/**
 * The conversation up to its first user turn (tools, system prompt, first question), cut to
 * AFFINITY_PREFIX_CHARS: later turns of one conversation keep the same prefix, so they find the
 * replica that cached the earlier ones, and conversations sharing a long system prompt meet there too.
 */
function affinityPrefix(messages: readonly ChatMessage[], toolsJson: string): string {
  const firstUser = messages.findIndex((m) => m.role === "user");
  const head = firstUser === -1 ? messages : messages.slice(0, firstUser + 1);
  let prefix = toolsJson;
  for (const m of head) {
    if (prefix.length >= AFFINITY_PREFIX_CHARS) break;
    prefix += `\u0000${m.role}\u0000${m.content}`;
  }
  return prefix.slice(0, AFFINITY_PREFIX_CHARS);
}
