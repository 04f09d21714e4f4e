import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { stringifyJson } from "../../protocol/money-json.js";
import type { CompletionStore } from "../../chat-store/completion-store.js";
import type { ChatCompletionChunk, WireFinishReason, WireUsage } from "../../protocol/chat-response.js";
import type { ChatRun, ChatService, ServingEvent, TokenLogprob } from "../../serving/types.js";
import { CompletionAssembler, toWireLogprobs } from "../completion-assembler.js";
import { storedCompletionRoutes, storing, type StoreCompletion } from "./stored-completions.js";
import { callerOf } from "../auth.js";
import { parseChatRequest, toChatInput } from "../chat-input.js";
import { toErrorBody } from "../errors.js";
import { exposeRateLimits } from "../rate-limit-headers.js";
import { traceOf } from "../tracing.js";
import { abortOnDisconnect, midStreamFailure, toWireUsage } from "../runs.js";
import { COMPAT_PREFIX } from "../api-paths.js";
import { OutputGate, openSse, type SseWriter, type StreamLimits } from "../sse.js";

/**
 * Registered under each API prefix (see app.ts), so the paths here are relative to it. Streamed
 * `role`: OpenAI sends it in each choice's first chunk only, and so do `/v1` and `/v1/openai`; the
 * specification's `/v1/compat` puts it in every content chunk, as its contract says.
 */
export function chatRoutes(app: FastifyInstance, chat: ChatService, limits: StreamLimits, completions?: CompletionStore): void {
  const roleInEveryChunk = app.prefix === COMPAT_PREFIX;
  app.post("/chat/completions", async (request, reply) => {
    const body = parseChatRequest(request.body);
    const signal = abortOnDisconnect(reply);
    const input = toChatInput(body);
    const gate = new OutputGate();
    const caller = callerOf(request);
    const run = await chat.start(caller, input, signal, {
      requestId: request.id,
      api: "chat.completions",
      output: gate,
      trace: traceOf(request),
    });
    exposeRateLimits(reply, run);
    const logprobs = input.logprobs !== undefined;
    const store = body.store === true && completions ? storing(completions, caller.accountId, body, run) : null;
    if (body.stream)
      return streamRun(run, openSse(reply, { gate, limits }), request, body.stream_options?.include_usage === true, logprobs, store, {
        n: input.n ?? 1,
        roleInEveryChunk,
      });
    return sendCompletion(run, reply, input.n ?? 1, logprobs, store);
  });
  if (completions) storedCompletionRoutes(app, completions);
}

async function sendCompletion(
  run: ChatRun,
  reply: FastifyReply,
  n: number,
  logprobs: boolean,
  store: StoreCompletion | null,
): Promise<FastifyReply> {
  const assembler = new CompletionAssembler(run, n, logprobs);
  for await (const event of run.events) {
    const completion = assembler.apply(event);
    if (completion) {
      await store?.(completion, false);
      return reply.type("application/json; charset=utf-8").send(stringifyJson(completion));
    }
    if (event.type === "done") return reply; // cancelled: the client is gone; nobody to answer
  }
  throw new Error("The generation ended without a finish event.");
}

async function streamRun(
  run: ChatRun,
  sse: SseWriter,
  request: FastifyRequest,
  includeUsage: boolean,
  logprobs: boolean,
  store: StoreCompletion | null,
  { n, roleInEveryChunk }: { n: number; roleInEveryChunk: boolean },
): Promise<void> {
  const assembler = store ? new CompletionAssembler(run, n, logprobs) : null;
  const chunks = chunkShapes(run, { includeUsage, logprobs, roleInEveryChunk });
  const started = new Set<number>([0]);
  try {
    sse.send(chunks.content(0, "")); // first byte as soon as generation starts, as OpenAI does
    for await (const event of run.events) {
      const completion = assembler?.apply(event);
      // Stored before the stream ends, so the client may retrieve it as soon as it has read [DONE].
      if (completion) await store!(completion, true);
      for (const chunk of eventChunks(event, chunks, started, includeUsage)) sse.send(chunk);
    }
  } catch (error) {
    sse.send(toErrorBody(midStreamFailure(request, error)));
  }
  sse.done();
}

type ChunkShapes = ReturnType<typeof chunkShapes>;

/** The run's chunks, each kind of delta in the wire's shape; `role` in each choice's first delta (or every one). */
function chunkShapes(
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
function eventChunks(event: ServingEvent, chunks: ChunkShapes, started: Set<number>, includeUsage: boolean): ChatCompletionChunk[] {
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
