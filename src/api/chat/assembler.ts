import type { ChatCompletion, WireFinishReason, WireLogprobs, WireToolCall } from "../../protocol/chat-response.js";
import type { ChatRun, ServingEvent, TokenLogprob, ToolCall, Usage } from "../../serving/types.js";
import { toWireUsage } from "../wire-usage.js";

export function toWireLogprobs(tokens: readonly TokenLogprob[]): WireLogprobs {
  return {
    content: tokens.map((t) => ({
      token: t.token,
      logprob: t.logprob,
      bytes: t.bytes,
      top_logprobs: t.top.map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes })),
    })),
    refusal: null,
  };
}

function toWireToolCall(call: ToolCall): WireToolCall {
  return { id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } };
}

/**
 * A run's events gathered into the `chat.completion` object: what a non-streamed request answers,
 * and what a stored (`store: true`) streamed one keeps.
 */
export class CompletionAssembler {
  private readonly choices: Array<{
    reasoning: string;
    content: string;
    logprobs: TokenLogprob[];
    calls: ToolCall[];
    finish: WireFinishReason;
  }>;

  constructor(
    private readonly run: ChatRun,
    n: number,
    private readonly logprobs: boolean,
  ) {
    this.choices = Array.from({ length: n }, () => ({ reasoning: "", content: "", logprobs: [], calls: [], finish: "stop" }));
  }

  /** Takes one event; on `done`, the whole completion (null when the run was cancelled). */
  apply(event: ServingEvent): ChatCompletion | null {
    if (event.type === "done") return event.finishReason === "cancelled" ? null : this.completion(event.usage);
    const choice = this.choices[event.index]!;
    if (event.type === "reasoning") choice.reasoning += event.text;
    else if (event.type === "text") {
      choice.content += event.text;
      if (event.logprobs) choice.logprobs.push(...event.logprobs);
    } else if (event.type === "tool_calls") choice.calls.push(...event.calls);
    else choice.finish = event.finishReason;
    return null;
  }

  private completion(usage: Usage): ChatCompletion {
    const run = this.run;
    return {
      id: run.id,
      object: "chat.completion",
      created: run.created,
      model: run.model,
      service_tier: run.serviceTier,
      system_fingerprint: run.systemFingerprint,
      choices: this.choices.map((c, index) => ({
        index,
        message: {
          role: "assistant",
          // No answer after the tool calls or the thinking is null, as vLLM returns it; plain empty output stays "".
          content: c.calls.length > 0 || c.reasoning ? c.content || null : c.content,
          ...(c.reasoning ? { reasoning_content: c.reasoning } : {}),
          ...(c.calls.length > 0 ? { tool_calls: c.calls.map(toWireToolCall) } : {}),
        },
        finish_reason: c.finish,
        logprobs: this.logprobs ? toWireLogprobs(c.logprobs) : null,
      })),
      usage: toWireUsage(usage),
    };
  }
}
