import type { Token } from "node-llama-cpp";

export type { Token };

/** A chat message as the chat template sees it. The engine knows no wire format beyond this. */
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface SamplingSettings {
  temperature: number;
  topP: number;
  /** Undefined means a fresh random seed per request. */
  seed?: number;
}

export interface GenerationRequest {
  promptTokens: readonly Token[];
  maxTokens: number;
  sampling: SamplingSettings;
  /** Strings that end generation; they are cut exactly and never emitted. */
  stop: readonly string[];
}

/** `cancelled`: the caller aborted; the tokens generated until then are still reported for metering. */
export type FinishReason = "stop" | "length" | "cancelled";

export type EngineEvent =
  | { type: "started"; queuedMs: number }
  /** `completionTokens`: tokens generated so far, including any whose text is still held back. */
  | { type: "text"; text: string; completionTokens: number }
  | { type: "finish"; reason: FinishReason; completionTokens: number };

export interface ModelHostStats {
  running: number;
  waiting: number;
  sequences: number;
}
