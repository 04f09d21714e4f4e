import { Template } from "@huggingface/jinja";
import type { LoadedModel } from "./native/loaded-model.js";
import { promptOpensThinking } from "../protocol/think-tags.js";
import type { ChatMessage, PromptOptions, RenderedPrompt, ToolDefinition } from "./types.js";

/** The model's template refused the conversation (e.g. roles that do not alternate). */
export class PromptTemplateError extends Error {}

export interface ChatTemplate {
  /** Renders the conversation (and the tools the model may call) with the generation prompt appended, as token ids. */
  tokenize(messages: readonly ChatMessage[], tools?: readonly ToolDefinition[], options?: PromptOptions): RenderedPrompt;
  /** Whether the template renders a `tools` list itself (else the tools go into a system message). */
  readonly rendersTools: boolean;
  /** The Jinja source rendered: the GGUF's own template or the fallback. */
  readonly source: string;
}

/**
 * The chat template is the Jinja template in the GGUF's metadata (or, for a GGUF without one, the
 * fallback the catalog names), rendered the way the model's own tokenizer config would render it
 * (bos_token, add_generation_prompt), then tokenized with special tokens recognised. This is what
 * llama-server and vLLM do, so prompts match theirs.
 *
 * Tools: a template that uses a `tools` variable gets them there, and assistant `tool_calls` and
 * `tool` messages in the Hugging Face shape. A template that knows nothing of tools gets a system
 * message describing them and the JSON call shape, assistant calls rendered as that JSON, and tool
 * results as messages of the role `tool` (or, if the template never mentions that role, as user
 * messages saying which call they answer).
 *
 * Thinking: `options.thinking === false` passes `enable_thinking: false` to the template (Qwen3's
 * switch). Whether the rendered prompt ends inside an open `<think>` (DeepSeek-R1 and Qwen3.5
 * templates open it themselves) is reported, so the caller knows generation starts in reasoning.
 */
export function chatTemplateFor(
  model: Pick<LoadedModel, "chatTemplate" | "bosText" | "eosText" | "tokenize">,
  fallback?: string,
): ChatTemplate {
  const embedded = model.chatTemplate;
  const source = embedded !== undefined && embedded.length > 0 ? embedded : fallback;
  if (!source) throw new Error("The GGUF file has no chat template (tokenizer.chat_template) and the catalog names no fallback.");
  const template = new Template(source);
  const bosToken = model.bosText;
  const eosToken = model.eosText;
  const rendersTools = /\btools\b/.test(source);
  const knowsToolRole = /\btool\b|message\[['"]role['"]\]\s*\+|message\.role\s*\+/.test(source);

  return {
    rendersTools,
    source,
    tokenize(messages, tools = [], options = {}) {
      const conversation = rendersTools ? messages.map(templateMessage) : withToolInstructions(messages, tools, knowsToolRole);
      let text: string;
      try {
        text = template.render({
          messages: conversation,
          ...(rendersTools && tools.length > 0 ? { tools: tools.map(templateTool) } : {}),
          add_generation_prompt: options.addGenerationPrompt ?? true,
          bos_token: bosToken,
          eos_token: eosToken,
          // Qwen3-style templates read this; a template that does not simply ignores it.
          ...(options.thinking === false ? { enable_thinking: false } : {}),
        });
      } catch (error) {
        // Templates refuse conversations they cannot express with raise_exception (a plain Error).
        throw new PromptTemplateError(`The model's chat template could not render this conversation: ${(error as Error).message}`);
      }
      return { tokens: model.tokenize(text), opensThinking: promptOpensThinking(text) };
    },
  };
}

/**
 * A lower bound on the tokens of the prompt these messages render to, found without rendering
 * them: every message costs at least one token (a template writes role markers around it), and
 * the text a template writes verbatim at least its size over the most a token stands for (see
 * minimumTextTokens). Templates trim content, and drop what an assistant turn reasoned before its `</think>`
 * (Qwen3, DeepSeek-R1), so only what is left of each is counted.
 */
export function minimumPromptTokens(messages: readonly ChatMessage[], bounds: PieceBounds): number {
  const texts = messages.map(({ role, content }) => {
    const end = role === "assistant" ? content.lastIndexOf("</think>") : -1;
    return (end < 0 ? content : content.slice(end + "</think>".length)).trim();
  });
  return Math.max(messages.length, minimumTextTokens(texts, bounds));
}

/** What bounds a text's tokens from below: the most bytes, and the most ASCII letters and digits, one token stands for. */
export type PieceBounds = Pick<LoadedModel, "maxTokenBytes" | "maxTokenAlnumBytes">;

/**
 * A lower bound on the tokens of texts written out together: every byte, and every ASCII letter or
 * digit, is covered by one token's piece. Counting letters and digits reads the text once, so it is
 * done only for texts long enough to matter.
 */
export function minimumTextTokens(texts: string | readonly string[], bounds: PieceBounds): number {
  const all = typeof texts === "string" ? [texts] : texts;
  const bytes = all.reduce((n, text) => n + Buffer.byteLength(text), 0);
  const byBytes = Math.ceil(bytes / bounds.maxTokenBytes);
  if (bytes < 4096 || !Number.isFinite(bounds.maxTokenAlnumBytes)) return byBytes;
  let alnum = 0;
  for (const text of all) {
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if ((c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)) alnum++;
    }
  }
  return Math.max(byBytes, Math.ceil(alnum / bounds.maxTokenAlnumBytes));
}

/** A message in the shape Hugging Face chat templates expect. */
function templateMessage(m: ChatMessage): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.toolCalls?.length) {
    out.tool_calls = m.toolCalls.map((call) => ({
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: parseArguments(call.arguments) },
    }));
  }
  if (m.toolCallId !== undefined) out.tool_call_id = m.toolCallId;
  return out;
}

function templateTool(tool: ToolDefinition): Record<string, unknown> {
  return { type: "function", function: { name: tool.name, description: tool.description ?? "", parameters: tool.parameters } };
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The JSON a model without native tool support writes to call a tool (and reads back in its history). */
export function toolCallJson(name: string, args: string): string {
  return JSON.stringify({ name, arguments: parseArguments(args) });
}

export function toolInstructions(tools: readonly ToolDefinition[]): string {
  const list = JSON.stringify(tools.map((t) => ({ name: t.name, description: t.description ?? "", parameters: t.parameters })));
  return (
    "You are an expert in composing functions. You are given a question and a set of possible functions. " +
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose. " +
    "If no function is needed, answer the question in plain text.\n\n" +
    `You have access to the following tools:\n<tools>${list}</tools>\n\n` +
    "To call tools, the output MUST strictly adhere to the following format, and NO other text MUST be included:\n" +
    '<tool_call>[\n{"name": "func_name1", "arguments": {"argument1": "value1", "argument2": "value2"}},\n... (more tool calls as required)\n]</tool_call>\n\n' +
    "When tool results are given to you, use them to answer the user in plain text."
  );
}

function withToolInstructions(
  messages: readonly ChatMessage[],
  tools: readonly ToolDefinition[],
  knowsToolRole: boolean,
): Record<string, unknown>[] {
  const out = messages.map((m): Record<string, unknown> => {
    if (m.role === "assistant" && m.toolCalls?.length) {
      const calls = `<tool_call>[${m.toolCalls.map((c) => toolCallJson(c.name, c.arguments)).join(", ")}]</tool_call>`;
      return { role: "assistant", content: m.content ? `${m.content}\n${calls}` : calls };
    }
    if (m.role === "tool" && !knowsToolRole) return { role: "user", content: `Result of tool call ${m.toolCallId ?? ""}:\n${m.content}` };
    return { role: m.role, content: m.content };
  });
  if (tools.length === 0) return out;
  const instructions = toolInstructions(tools);
  if (out[0]?.role === "system") out[0] = { role: "system", content: `${String(out[0].content)}\n\n${instructions}` };
  else out.unshift({ role: "system", content: instructions });
  return out;
}
