import { parseExact, send } from "../api.js";
import type { ChatUsage } from "../wire.js";

/** What one streamed answer produced, with its timings measured in the browser. */
export interface AnswerStats {
  usage: ChatUsage | null;
  serviceTier: string | null;
  finishReason: string | null;
  /** From sending the request to the first content. */
  ttftMs: number | null;
  /** Completion tokens over the time from the first to the last content. */
  tokensPerSecond: number | null;
}

/**
 * Sends a streaming chat request and reports each content delta as it arrives. Server-sent events
 * are read by hand (the body is a stream of `data:` lines), since EventSource cannot POST or send
 * an Authorization header.
 */
export async function streamChat(
  key: string,
  body: Record<string, unknown>,
  onText: (text: string) => void,
  signal: AbortSignal,
): Promise<AnswerStats> {
  const started = performance.now();
  const response = await send(key, "/v1/compat/chat/completions", { body, signal });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let first: number | null = null;
  let last = started;
  const stats: AnswerStats = { usage: null, serviceTier: null, finishReason: null, ttftMs: null, tokensPerSecond: null };

  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (!data || data === "[DONE]") continue;
      const chunk = parseExact(data) as StreamChunk;
      if (chunk.error) throw new Error(chunk.error.message ?? "The stream reported an error.");
      stats.serviceTier = chunk.service_tier ?? stats.serviceTier;
      if (chunk.usage) stats.usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (choice?.finish_reason) stats.finishReason = choice.finish_reason;
      const text = choice?.delta?.content ?? "";
      if (text) {
        const now = performance.now();
        first ??= now;
        last = now;
        onText(text);
      }
    }
  }
  if (first !== null) {
    stats.ttftMs = first - started;
    // Rejected prediction tokens are billed as completion tokens but are not in the answer.
    const completion =
      stats.usage && stats.usage.completion_tokens - (stats.usage.completion_tokens_details?.rejected_prediction_tokens ?? 0);
    // The first token's time is the prompt's; the rate is what came after it.
    if (completion && completion > 1 && last > first) stats.tokensPerSecond = ((completion - 1) * 1000) / (last - first);
  }
  return stats;
}

interface StreamChunk {
  service_tier?: string;
  usage?: ChatUsage;
  error?: { message?: string };
  choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>;
}
