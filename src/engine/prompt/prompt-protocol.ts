/**
 * The messages between the main thread and a prompt worker, which renders chat templates and
 * tokenizes prompts so that the main thread never spends time in proportion to a prompt's size.
 */
import type { ChatMessage, PromptOptions, ToolDefinition } from "../types.js";

export interface PromptWorkerInit {
  libraryDir: string;
  /** The loaded model (its vocabulary is read-only, so every thread may tokenize with it). */
  model: number | bigint;
  /** The Jinja chat template: the GGUF's own or the catalog's fallback. */
  templateSource: string;
}

export type PromptJob =
  | { id: number; kind: "chat"; messages: readonly ChatMessage[]; tools: readonly ToolDefinition[]; options: PromptOptions }
  /** `addSpecial`: BOS (and EOS) where the tokenizer adds them (a raw prompt); false for a prediction. */
  | { id: number; kind: "text"; text: string; addSpecial: boolean };

export type PromptReply =
  | { id: number; tokens: Int32Array; opensThinking: boolean }
  /** `refused`: the chat template refused the conversation (the client's mistake). */
  | { id: number; error: string; refused: boolean };
