import { Template } from "@huggingface/jinja";
import type { LlamaModel } from "node-llama-cpp";
import type { ChatMessage, Token } from "./types.js";

/** The model's template refused the conversation (e.g. roles that do not alternate). */
export class PromptTemplateError extends Error {}

export interface ChatTemplate {
  /** Renders the conversation with the generation prompt appended, as token ids. */
  tokenize(messages: readonly ChatMessage[]): Token[];
}

/**
 * The chat template is the Jinja template in the GGUF's metadata (or, for a GGUF without one, the
 * fallback the catalog names), rendered the way the model's own tokenizer config would render it
 * (bos_token, add_generation_prompt), then tokenized with special tokens recognised. This is what
 * llama-server and vLLM do, so prompts match theirs.
 */
export function chatTemplateFor(model: LlamaModel, fallback?: string): ChatTemplate {
  const embedded = model.fileInfo.metadata.tokenizer?.chat_template;
  const source = typeof embedded === "string" && embedded.length > 0 ? embedded : fallback;
  if (!source) {
    throw new Error(`The GGUF file ${model.filename ?? ""} has no chat template (tokenizer.chat_template) and the catalog names no fallback.`);
  }
  const template = new Template(source);
  const bosToken = model.tokens.bosString ?? "";
  const eosToken = model.tokens.eosString ?? "";

  return {
    tokenize(messages) {
      let text: string;
      try {
        text = template.render({
          messages: messages.map((m) => ({ role: m.role, content: m.content })),
          add_generation_prompt: true,
          bos_token: bosToken,
          eos_token: eosToken,
        });
      } catch (error) {
        // Templates refuse conversations they cannot express with raise_exception (a plain Error).
        throw new PromptTemplateError(`The model's chat template could not render this conversation: ${(error as Error).message}`);
      }
      return model.tokenize(text, true);
    },
  };
}
