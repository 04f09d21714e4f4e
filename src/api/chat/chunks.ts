import type { ChatCompletionChunk, WireFinishReason, WireUsage } from "../../protocol/chat-response.js";
import type { ChatRun, ServingEvent, TokenLogprob } from "../../serving/types.js";
import { toWireUsage } from "../wire-usage.js";
import { toWireLogprobs } from "./assembler.js";

export type ChunkShapes = ReturnType<typeof chunkShapes>;

/** The run's chunks, each kind of delta in the wire's shape; `role` in each choice's first delta (or every one). */
export function chunkShapes(
  run: ChatRun,
  { includeUsage, logprobs, roleInEveryChunk }: Record<"includeUsage" | "logprobs" | "roleInEveryChunk", boolean>,
) {
  const introduced = new Set<number>();
  const role = (index: number): { role?: "assistant" } => {
    if (!roleInEveryChunk && introduced.has(index)) return {};
    introduced.add(index);
    return { role: "assistant" };
  };
  const chunk = (choices: ChatCompletionChunk["choices"], usage?: WireUsage): ChatCompletionChunk => ({
    id: run.id,
    object: "chat.completion.chunk",
    created: run.created,
    model: run.model,
    service_tier: run.serviceTier,
    system_fingerprint: run.systemFingerprint,
    choices,
    ...(includeUsage ? { usage: usage ?? null } : {}),
  });
  const delta = (index: number, value: ChatCompletionChunk["choices"][number]["delta"]) =>
    chunk([{ index, delta: value, finish_reason: null, logprobs: null }]);
  return {
    content: (index: number, text: string, tokens?: readonly TokenLogprob[]) =>
      chunk([
        {
          index,
          delta: { ...role(index), content: text },
          finish_reason: null,
          logprobs: logprobs ? toWireLogprobs(tokens ?? []) : null,
        },
      ]),
    reasoning: (index: number, text: string) => delta(index, { ...role(index), reasoning_content: text }),
    // One fragment per call, carrying its id, name and the whole arguments text.
    toolCalls: (index: number, calls: ReadonlyArray<{ id: string; name: string; arguments: string }>) =>
      delta(index, {
        ...role(index),
        content: null,
        tool_calls: calls.map((call, i) => ({
          index: i,
          id: call.id,
          type: "function" as const,
          function: { name: call.name, arguments: call.arguments },
        })),
      }),
    finish: (index: number, reason: WireFinishReason) => chunk([{ index, delta: {}, finish_reason: reason, logprobs: null }]),
    usage: (usage: WireUsage) => chunk([], usage),
  };
}

/** What one event of the run sends; a choice that finishes without output still gets its role first. */
export function eventChunks(event: ServingEvent, chunks: ChunkShapes, started: Set<number>, includeUsage: boolean): ChatCompletionChunk[] {
  switch (event.type) {
    case "reasoning":
      started.add(event.index);
      return [chunks.reasoning(event.index, event.text)];
    case "text":
      started.add(event.index);
      return [chunks.content(event.index, event.text, event.logprobs)];
    case "tool_calls":
      return [chunks.toolCalls(event.index, event.calls)];
    case "finish": {
      const opening = started.has(event.index) ? [] : [chunks.content(event.index, "")];
      started.add(event.index);
      return [...opening, chunks.finish(event.index, event.finishReason)];
    }
    default:
      return event.finishReason !== "cancelled" && includeUsage ? [chunks.usage(toWireUsage(event.usage))] : [];
  }
}
