import type { ChatMessage, EngineEvent, SamplingSettings } from "../engine/types.js";

/**
 * What serving needs from whatever runs a model: the embedded engine today, an OpenAI-compatible
 * upstream (vLLM, SGLang, llama-server, another Switchyard worker) tomorrow.
 */
export interface PreparedPrompt {
  tokenCount: number;
}

export interface GenerationParams {
  maxTokens: number;
  sampling: SamplingSettings;
  stop: readonly string[];
}

export interface BackendStats {
  running: number;
  waiting: number;
  sequences: number;
}

export interface Backend<P extends PreparedPrompt = PreparedPrompt> {
  /** Tokens one request may hold: prompt plus completion. */
  readonly contextWindow: number;
  /** Renders the conversation with the model's chat template; throws PromptRejected if the template refuses it. */
  prepare(messages: readonly ChatMessage[]): Promise<P>;
  generate(prompt: P, params: GenerationParams, signal: AbortSignal): AsyncGenerator<EngineEvent>;
  stats(): BackendStats;
  close(): Promise<void>;
}

/** The model's chat template refused the conversation (e.g. roles that do not alternate). */
export class PromptRejected extends Error {}

/** The backend's wait queue is full. */
export class BackendBusy extends Error {}
