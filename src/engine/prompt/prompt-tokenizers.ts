import { minimumPromptTokens, minimumTextTokens, type ChatTemplate } from "../chat-template.js";
import type { LoadedModel } from "../native/loaded-model.js";
import type { ChatMessage, PromptOptions, RenderedPrompt, Token, ToolDefinition } from "../types.js";
import { nonEmptyPrompt } from "./empty-prompt.js";
import type { PromptPool } from "./prompt-pool.js";

/**
 * Prompts up to this many characters are rendered and tokenized where they are asked for (well
 * under a millisecond, less than a message to a worker costs); larger ones on a prompt worker.
 */
const INLINE_PROMPT_CHARS = 16 * 1024;

/**
 * A model's prompt tokenizers: small prompts inline, large ones on the prompt pool, shared by
 * `fairnessKey`. A prompt that comes out empty is BOS alone, or refused (see nonEmptyPrompt).
 */
export function promptTokenizers(model: LoadedModel, template: ChatTemplate, pool: PromptPool) {
  const tokenize = async (text: string, addSpecial: boolean, fairnessKey: string | undefined): Promise<Token[]> =>
    text.length <= INLINE_PROMPT_CHARS
      ? model.tokenize(text, { addSpecial })
      : (await pool.run({ kind: "text", text, addSpecial }, fairnessKey)).tokens;
  return {
    async tokenizeChat(
      messages: readonly ChatMessage[],
      tools: readonly ToolDefinition[] = [],
      options: PromptOptions = {},
    ): Promise<RenderedPrompt> {
      const { fairnessKey, ...rendering } = options;
      const size = messages.reduce((n, m) => n + m.content.length + (m.toolCalls?.reduce((k, c) => k + c.arguments.length, 0) ?? 0), 0);
      const rendered =
        size + (tools.length > 0 ? JSON.stringify(tools).length : 0) <= INLINE_PROMPT_CHARS
          ? template.tokenize(messages, tools, rendering)
          : await pool.run({ kind: "chat", messages, tools, options: rendering }, fairnessKey);
      return { ...rendered, tokens: [...nonEmptyPrompt(rendered.tokens, model.bosToken)] };
    },
    async tokenizeText(text: string, options: Pick<PromptOptions, "fairnessKey"> = {}): Promise<Token[]> {
      return [...nonEmptyPrompt(await tokenize(text, true, options.fairnessKey), model.bosToken)];
    },
    /** A prediction's text as plain tokens (no BOS): what the model would generate to write it. */
    tokenizePrediction: (text: string, options: Pick<PromptOptions, "fairnessKey"> = {}): Promise<Token[]> =>
      tokenize(text, false, options.fairnessKey),
    minimumPromptTokens: (messages: readonly ChatMessage[]) => minimumPromptTokens(messages, model),
    minimumTextTokens: (text: string) => minimumTextTokens(text, model),
  };
}
