import type { ChatMessage } from "./datasets.js";

/** An OpenAI-compatible server under test. */
export interface Target {
  name: string;
  /** Up to and excluding `/chat/completions`. */
  baseURL: string;
  key: string;
  model: string;
  /** The server's process, whose memory the benchmark samples. */
  pid?: number;
}

export interface RequestResult {
  ok: boolean;
  status: number;
  errorCode?: string;
  tier: string;
  /** From sending to the end (or to the failure). */
  e2eMs: number;
  ttftMs?: number;
  /** Gaps between successive output chunks. */
  itlMs: number[];
  outputTokens: number;
  promptTokens: number;
  /** Prompt tokens the server reports as reused (ours: cached_tokens; llama-server: timings.cache_n). */
  cachedTokens?: number;
  content: string;
  /** The error body's message, when the server refused the request. */
  errorMessage?: string;
  /** The last `usage` object the stream carried, as sent (e.g. completion_tokens_details). */
  usage?: Record<string, unknown>;
  /** llama-server's `timings` from the last chunk that had them (draft_n, draft_n_accepted, cache_n). */
  timings?: Record<string, unknown>;
}

/**
 * The sampling settings a request sends. `explicit`: llama-server's defaults spelled out, so every
 * target does the same sampling work. `openai`: what OpenAI clients send (temperature 1 and nothing
 * else), each server applying its own defaults to the rest (llama-server truncates to its top 40;
 * ours samples the whole vocabulary): the load most users put on a server.
 */
export const SAMPLING = {
  explicit: { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05 },
  openai: { temperature: 1 },
} as const;
export type SamplingName = keyof typeof SAMPLING;

/** Sends one streamed chat request and times every output chunk as it arrives; a dropped connection is a failure, not a crash. */
export async function streamChat(
  target: Target,
  messages: ChatMessage[],
  maxTokens: number,
  tier: string | undefined,
  sampling: SamplingName = "explicit",
  fields: Record<string, unknown> = {},
): Promise<RequestResult> {
  return streamChatBody(target, {
    messages,
    max_tokens: maxTokens,
    ...SAMPLING[sampling],
    ...fields,
    ...(tier ? { service_tier: tier } : {}),
  });
}

/** Like `streamChat`, with the request's fields as given (model, stream and stream_options are added). */
export async function streamChatBody(target: Target, fields: Record<string, unknown>): Promise<RequestResult> {
  const sent = performance.now();
  const tier = typeof fields.service_tier === "string" ? fields.service_tier : undefined;
  try {
    return await timedStream(target, fields, tier, sent);
  } catch (error) {
    const code = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
    return {
      ok: false,
      status: 0,
      errorCode: `network:${code}`,
      tier: tier ?? "default",
      e2eMs: performance.now() - sent,
      itlMs: [],
      outputTokens: 0,
      promptTokens: 0,
      content: "",
    };
  }
}

async function timedStream(
  target: Target,
  fields: Record<string, unknown>,
  tier: string | undefined,
  sent: number,
): Promise<RequestResult> {
  const response = await fetch(`${target.baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${target.key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: target.model, ...fields, stream: true, stream_options: { include_usage: true } }),
  });
  const result: RequestResult = {
    ok: response.ok,
    status: response.status,
    tier: tier ?? "default",
    e2eMs: 0,
    itlMs: [],
    outputTokens: 0,
    promptTokens: 0,
    content: "",
  };
  if (!response.ok) {
    const body = (await response.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
    result.errorCode = body.error?.code ?? String(response.status);
    if (body.error?.message) result.errorMessage = body.error.message;
    result.e2eMs = performance.now() - sent;
    return result;
  }
  let last: number | undefined;
  let textChunks = 0;
  let buffer = "";
  const decoder = new TextDecoder();
  for await (const bytes of response.body as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const event = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6));
      const delta = chunk.choices?.[0]?.delta;
      const text = (delta?.content ?? "") + (delta?.reasoning_content ?? "");
      if (text) {
        const now = performance.now();
        if (last === undefined) result.ttftMs = now - sent;
        else result.itlMs.push(now - last);
        last = now;
        textChunks += 1;
        result.content += delta?.content ?? "";
      }
      if (chunk.timings) result.timings = chunk.timings;
      if (chunk.usage) {
        result.usage = chunk.usage;
        result.outputTokens = chunk.usage.completion_tokens;
        result.promptTokens = chunk.usage.prompt_tokens;
        const cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? chunk.timings?.cache_n;
        if (typeof cached === "number") result.cachedTokens = cached;
      } else if (chunk.timings && typeof chunk.timings.cache_n === "number") {
        result.cachedTokens = chunk.timings.cache_n;
      }
    }
  }
  // A server that ignores stream_options.include_usage (llama-cpp-python) sends one token per chunk.
  if (result.outputTokens === 0) result.outputTokens = textChunks;
  result.e2eMs = performance.now() - sent;
  return result;
}
