import { randomBytes } from "node:crypto";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { THINK_CLOSE, THINK_OPEN } from "../../protocol/think-tags.js";
import type {
  GenerationEvent,
  FinishReason,
  PredictionCounts,
  TokenAlternative,
  TokenLogprob,
  ToolCall,
} from "../../protocol/generation.js";

/** The upstream stopped answering in the middle of a stream (it died, or the connection broke). */
export class UpstreamStreamFailed extends Error {}

interface WireAlternative {
  token?: string;
  logprob?: number;
  bytes?: number[] | null;
}
interface WireChunk {
  choices?: Array<{
    /** `reasoning_content` (DeepSeek, llama-server, Switchyard), `reasoning` (newer vLLM). */
    delta?: {
      content?: string | null;
      reasoning_content?: string | null;
      reasoning?: string | null;
      tool_calls?: Array<{ index?: number; id?: string; function?: { name?: string; arguments?: string } }>;
    };
    /** Legacy completions. */
    text?: string;
    logprobs?: { content?: Array<WireAlternative & { top_logprobs?: WireAlternative[] }> | null } | null;
    finish_reason?: string | null;
  }>;
  usage?: {
    prompt_tokens?: number;
    /** OpenAI (and Switchyard) count rejected prediction tokens in here too. */
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
    completion_tokens_details?: { accepted_prediction_tokens?: number; rejected_prediction_tokens?: number } | null;
  } | null;
  error?: { message?: string };
}

/**
 * An upstream's SSE body as engine events: text deltas, tool calls (assembled from their
 * fragments), then one `finish` carrying the upstream's usage. Without usage, each content chunk
 * counts as one completion token (what an engine that streams token by token sends), and the prompt
 * stays at its estimate. A body that ends before `finish_reason` and `[DONE]` is a failure.
 */
export async function* streamEvents(body: AsyncIterable<Uint8Array>, signal: AbortSignal): AsyncGenerator<GenerationEvent> {
  const chunks: WireChunk[] = [];
  let done = false;
  const parser = createParser({
    onEvent: (message: EventSourceMessage) => {
      if (message.data === "[DONE]") done = true;
      else chunks.push(JSON.parse(message.data) as WireChunk);
    },
  });
  const decoder = new TextDecoder();
  const state = new StreamState();
  try {
    for await (const bytes of body) {
      parser.feed(decoder.decode(bytes, { stream: true }));
      for (const chunk of chunks.splice(0)) yield* state.read(chunk);
      if (done) break;
    }
  } catch (error) {
    if (signal.aborted) {
      yield { type: "finish", reason: "cancelled", completionTokens: state.completionTokens };
      return;
    }
    throw new UpstreamStreamFailed(
      `The upstream engine's stream broke after ${state.completionTokens} tokens: ${(error as Error).message}`,
    );
  }
  if (signal.aborted) {
    yield { type: "finish", reason: "cancelled", completionTokens: state.completionTokens };
    return;
  }
  if (!state.finishReason)
    throw new UpstreamStreamFailed(`The upstream engine's stream ended after ${state.completionTokens} tokens without finishing.`);
  yield* state.finish();
}

class StreamState {
  completionTokens = 0;
  finishReason: FinishReason | null = null;
  private calls: Array<{ id: string; name: string; arguments: string }> = [];
  private usage: WireChunk["usage"] = null;
  private inReasoning = false;

  *read(chunk: WireChunk): Generator<GenerationEvent> {
    if (chunk.error) throw new UpstreamStreamFailed(`The upstream engine failed mid-stream: ${chunk.error.message ?? "unknown error"}`);
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (!choice) return;
    for (const fragment of choice.delta?.tool_calls ?? []) this.addCallFragment(fragment);
    if (choice.delta?.tool_calls?.length) this.completionTokens++;
    const text = this.withThinkTags(
      choice.delta?.reasoning_content ?? choice.delta?.reasoning ?? "",
      choice.delta?.content ?? choice.text ?? "",
    );
    const logprobs = choice.logprobs?.content?.map(toTokenLogprob);
    if (text || logprobs?.length) {
      this.completionTokens += logprobs?.length || 1;
      yield { type: "text", text, completionTokens: this.completionTokens, ...(logprobs ? { logprobs } : {}) };
    }
    if (choice.finish_reason) this.finishReason = choice.finish_reason === "length" ? "length" : "stop";
  }

  /**
   * An upstream that splits reasoning itself sends it apart from the content; it goes on as a
   * `<think>` block in the text, which serving's reasoning splitter takes apart again like any
   * model's, so the caller gets `reasoning_content` and the reasoning token count either way.
   */
  private withThinkTags(reasoning: string, content: string): string {
    let text = "";
    if (reasoning) {
      if (!this.inReasoning) text += THINK_OPEN;
      this.inReasoning = true;
      text += reasoning;
    }
    if (content && this.inReasoning) {
      text += THINK_CLOSE;
      this.inReasoning = false;
    }
    return text + content;
  }

  *finish(): Generator<GenerationEvent> {
    const prediction = this.predictionCounts();
    // The upstream's completion_tokens holds the rejected prediction tokens; ours are the output's alone.
    const reported = this.usage?.completion_tokens;
    if (reported !== undefined) this.completionTokens = Math.max(this.completionTokens, reported - (prediction?.rejected ?? 0));
    if (this.calls.length > 0) {
      const calls: ToolCall[] = this.calls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments }));
      yield { type: "tool_calls", calls, completionTokens: this.completionTokens };
    }
    const prompt = this.usage?.prompt_tokens;
    yield {
      type: "finish",
      reason: this.finishReason!,
      completionTokens: this.completionTokens,
      ...(prompt !== undefined ? { promptTokens: prompt, cachedTokens: this.usage?.prompt_tokens_details?.cached_tokens ?? 0 } : {}),
      ...(prediction ? { prediction } : {}),
    };
  }

  /** The prediction counts an upstream's usage reported (OpenAI's names), if it reported any. */
  private predictionCounts(): PredictionCounts | undefined {
    const details = this.usage?.completion_tokens_details;
    const count = (value: unknown) => (typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? value : 0);
    if (!details || (details.accepted_prediction_tokens === undefined && details.rejected_prediction_tokens === undefined))
      return undefined;
    return { accepted: count(details.accepted_prediction_tokens), rejected: count(details.rejected_prediction_tokens) };
  }

  private addCallFragment(fragment: { index?: number; id?: string; function?: { name?: string; arguments?: string } }): void {
    const index = fragment.index ?? this.calls.length;
    const call = (this.calls[index] ??= { id: fragment.id ?? `call_${randomBytes(12).toString("hex")}`, name: "", arguments: "" });
    if (fragment.id) call.id = fragment.id;
    call.name += fragment.function?.name ?? "";
    call.arguments += fragment.function?.arguments ?? "";
  }
}

function alternative(a: WireAlternative): TokenAlternative {
  return { token: a.token ?? "", logprob: a.logprob ?? -9999, bytes: a.bytes ?? [...Buffer.from(a.token ?? "", "utf8")] };
}

function toTokenLogprob(t: WireAlternative & { top_logprobs?: WireAlternative[] }): TokenLogprob {
  return { ...alternative(t), top: (t.top_logprobs ?? []).map(alternative) };
}
