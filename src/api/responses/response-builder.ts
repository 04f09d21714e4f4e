import { randomBytes } from "node:crypto";
import { ExactDecimal } from "../../protocol/money-json.js";
import type { ChatMessage, ToolCall } from "../../serving/types.js";
import type { ResponsesRequestBody } from "../../protocol/responses-request.js";
import type { ChatRun, ServingEvent, Usage } from "../../serving/types.js";

/** What a response object says of its run; a background response knows it before its run starts. */
export type RunInfo = Pick<ChatRun, "id" | "created" | "model" | "serviceTier" | "systemFingerprint">;

export type ResponseStatus = "queued" | "in_progress" | "completed" | "incomplete" | "failed" | "cancelled";

/** Why a response failed, as OpenAI's `error` field says it. */
export interface ResponseError {
  code: string;
  message: string;
}

export const itemId = (prefix: string) => `${prefix}_${randomBytes(16).toString("hex")}`;

type ItemStatus = "in_progress" | "completed" | "incomplete";
type OutputItem =
  | { type: "reasoning"; id: string; status: ItemStatus; summary: []; content: Array<{ type: "reasoning_text"; text: string }> }
  | {
      type: "message";
      id: string;
      status: ItemStatus;
      role: "assistant";
      content: Array<{ type: "output_text"; text: string; annotations: []; logprobs: [] }>;
    }
  | { type: "function_call"; id: string; status: ItemStatus; call_id: string; name: string; arguments: string };

/** Sends one typed stream event; the builder numbers them. */
export type EmitEvent = (type: string, payload: Record<string, unknown>) => void;

function wireUsage(usage: Usage) {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: usage.cachedPromptTokens },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    total_tokens: usage.promptTokens + usage.completionTokens,
    estimated_cost: ExactDecimal.of(usage.cost),
  };
}

/**
 * Turns a run's serving events into the Responses API's output items, and, for a stream, into its
 * typed events in OpenAI's order: each item is added, filled by deltas, then done. Text and
 * reasoning items stay open while deltas of their kind keep coming.
 */
export class ResponseBuilder {
  private readonly output: OutputItem[] = [];
  private open: OutputItem | null = null;
  private sequence = 0;
  private text = "";
  private calls: ToolCall[] = [];

  constructor(
    private readonly run: RunInfo,
    private readonly body: ResponsesRequestBody,
    private readonly emitRaw: EmitEvent = () => {},
  ) {}

  private emit(type: string, payload: Record<string, unknown>): void {
    this.emitRaw(type, { type, sequence_number: this.sequence++, ...payload });
  }

  /** The response object; `usage` null until the run is done. */
  snapshot(status: ResponseStatus, usage: Usage | null = null, error: ResponseError | null = null) {
    const b = this.body;
    return {
      id: this.run.id,
      object: "response" as const,
      created_at: this.run.created,
      status,
      background: b.background ?? false,
      error,
      incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
      instructions: b.instructions ?? null,
      max_output_tokens: b.max_output_tokens ?? null,
      model: this.run.model,
      output: status === "in_progress" || status === "queued" ? [] : this.output,
      parallel_tool_calls: b.parallel_tool_calls ?? true,
      previous_response_id: b.previous_response_id ?? null,
      reasoning: { effort: b.reasoning?.effort ?? null, summary: null },
      service_tier: this.run.serviceTier,
      store: b.store ?? true,
      system_fingerprint: this.run.systemFingerprint,
      temperature: b.temperature ?? 1,
      text: { format: b.text?.format ?? { type: "text" }, verbosity: b.text?.verbosity ?? b.verbosity ?? "medium" },
      tool_choice: b.tool_choice ?? (b.tools?.length ? "auto" : "none"),
      tools: (b.tools ?? []).map((t) => ({
        type: "function",
        name: t.name,
        description: t.description ?? null,
        parameters: t.parameters ?? null,
        strict: t.strict ?? null,
      })),
      top_p: b.top_p ?? 1,
      truncation: "disabled",
      usage: usage ? wireUsage(usage) : null,
      user: b.user ?? null,
      metadata: b.metadata ?? {},
    };
  }

  started(): void {
    const response = this.snapshot("in_progress");
    this.emit("response.created", { response });
    this.emit("response.in_progress", { response });
  }

  /** A background response's first events, before its generation starts. */
  queued(): void {
    const response = this.snapshot("queued");
    this.emit("response.created", { response });
    this.emit("response.queued", { response });
  }

  /** A background response's generation started. */
  inProgress(): void {
    this.emit("response.in_progress", { response: this.snapshot("in_progress") });
  }

  /** Ends a background response that did not finish: cancelled (no event of its own), or failed. */
  ended(status: "cancelled" | "failed", usage: Usage | null, error: ResponseError | null = null) {
    this.close("incomplete");
    const response = this.snapshot(status, usage, error);
    if (status === "failed") this.emit("response.failed", { response });
    return response;
  }

  /** Applies one serving event; returns the finished response object on `done`. */
  apply(event: ServingEvent): ReturnType<ResponseBuilder["snapshot"]> | null {
    if (event.type === "reasoning") this.delta("reasoning", event.text);
    else if (event.type === "text") this.delta("message", event.text);
    else if (event.type === "tool_calls") this.toolCalls(event.calls);
    else if (event.type === "finish") this.close(event.finishReason === "length" ? "incomplete" : "completed");
    else if (event.finishReason !== "cancelled") {
      const status = this.output.some((i) => i.status === "incomplete") ? "incomplete" : "completed";
      const response = this.snapshot(status, event.usage);
      this.emit(status === "completed" ? "response.completed" : "response.incomplete", { response });
      return response;
    }
    return null;
  }

  /** The assistant turn this response adds to the conversation (for `previous_response_id`). */
  assistantMessage(): ChatMessage {
    return { role: "assistant", content: this.text, ...(this.calls.length ? { toolCalls: this.calls } : {}) };
  }

  private delta(kind: "reasoning" | "message", text: string): void {
    if (this.open?.type !== kind) {
      this.close("completed");
      this.open =
        kind === "reasoning"
          ? { type: "reasoning", id: itemId("rs"), status: "in_progress", summary: [], content: [{ type: "reasoning_text", text: "" }] }
          : {
              type: "message",
              id: itemId("msg"),
              status: "in_progress",
              role: "assistant",
              content: [{ type: "output_text", text: "", annotations: [], logprobs: [] }],
            };
      this.output.push(this.open);
      const at = { output_index: this.output.length - 1 };
      this.emit("response.output_item.added", { ...at, item: { ...this.open, content: [] } });
      this.emit("response.content_part.added", { ...at, item_id: this.open.id, content_index: 0, part: { ...this.open.content[0]! } });
    }
    const item = this.open as Extract<OutputItem, { type: "reasoning" | "message" }>;
    item.content[0]!.text += text;
    if (kind === "message") this.text += text;
    const type = kind === "reasoning" ? "response.reasoning_text.delta" : "response.output_text.delta";
    this.emit(type, {
      item_id: item.id,
      output_index: this.output.length - 1,
      content_index: 0,
      delta: text,
      ...(kind === "message" ? { logprobs: [] } : {}),
    });
  }

  private toolCalls(calls: readonly ToolCall[]): void {
    this.close("completed");
    for (const call of calls) {
      const item: OutputItem = {
        type: "function_call",
        id: itemId("fc"),
        status: "in_progress",
        call_id: call.id,
        name: call.name,
        arguments: "",
      };
      this.output.push(item);
      const at = { output_index: this.output.length - 1, item_id: item.id };
      this.emit("response.output_item.added", { output_index: at.output_index, item: { ...item } });
      this.emit("response.function_call_arguments.delta", { ...at, delta: call.arguments });
      item.arguments = call.arguments;
      this.emit("response.function_call_arguments.done", { ...at, name: call.name, arguments: call.arguments });
      this.open = item;
      this.calls.push(call);
    }
  }

  private close(status: "completed" | "incomplete"): void {
    const item = this.open;
    if (!item) return;
    this.open = null;
    item.status = status;
    const at = { output_index: this.output.indexOf(item) };
    if (item.type !== "function_call") {
      const part = item.content[0]!;
      const done = item.type === "message" ? "response.output_text.done" : "response.reasoning_text.done";
      this.emit(done, { ...at, item_id: item.id, content_index: 0, text: part.text, ...(item.type === "message" ? { logprobs: [] } : {}) });
      this.emit("response.content_part.done", { ...at, item_id: item.id, content_index: 0, part });
    }
    this.emit("response.output_item.done", { ...at, item });
  }
}
