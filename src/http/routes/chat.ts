import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { stringifyJson } from "../../protocol/money-json.js";
import type { CompletionStore } from "../../chat-store/store.js";
import type { ChatCompletionChunk, WireFinishReason, WireUsage } from "../../protocol/chat-response.js";
import type { ChatRun, ChatService, TokenLogprob } from "../../serving/types.js";
import { CompletionAssembler, toWireLogprobs } from "../completion-assembler.js";
import { storedCompletionRoutes, storing, type StoreCompletion } from "./stored-completions.js";
import { callerOf } from "../auth.js";
import { parseChatRequest, toChatInput } from "../chat-input.js";
import { toErrorBody } from "../errors.js";
import { exposeRateLimits } from "../rate-limit-headers.js";
import { abortOnDisconnect, midStreamFailure, toWireUsage } from "../runs.js";
import { OutputGate, openSse, type SseWriter, type StreamLimits } from "../sse.js";

/** Registered under each API prefix (see app.ts), so the paths here are relative to it. */
export function chatRoutes(app: FastifyInstance, chat: ChatService, limits: StreamLimits, completions?: CompletionStore): void {
  app.post("/chat/completions", async (request, reply) => {
    const body = parseChatRequest(request.body);
    const signal = abortOnDisconnect(reply);
    const input = toChatInput(body);
    const gate = new OutputGate();
    const caller = callerOf(request);
    const run = await chat.start(caller, input, signal, { requestId: request.id, api: "chat.completions", output: gate });
    exposeRateLimits(reply, run);
    const logprobs = input.logprobs !== undefined;
    const store = body.store === true && completions ? storing(completions, caller.accountId, body, run) : null;
    if (body.stream)
      return streamRun(
        run,
        openSse(reply, { gate, limits }),
        request,
        body.stream_options?.include_usage === true,
        logprobs,
        store,
        input.n ?? 1,
      );
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
  n: number,
): Promise<void> {
  const assembler = store ? new CompletionAssembler(run, n, logprobs) : null;
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
  const started = new Set<number>();
  const content = (index: number, text: string, tokens?: readonly TokenLogprob[]) =>
    chunk([
      { index, delta: { role: "assistant", content: text }, finish_reason: null, logprobs: logprobs ? toWireLogprobs(tokens ?? []) : null },
    ]);
  const finish = (index: number, reason: WireFinishReason) => chunk([{ index, delta: {}, finish_reason: reason, logprobs: null }]);

  try {
    sse.send(content(0, "")); // first byte as soon as generation starts, as OpenAI does
    started.add(0);
    for await (const event of run.events) {
      const completion = assembler?.apply(event);
      // Stored before the stream ends, so the client may retrieve it as soon as it has read [DONE].
      if (completion) await store!(completion, true);
      if (event.type === "reasoning") {
        started.add(event.index);
        sse.send(
          chunk([{ index: event.index, delta: { role: "assistant", reasoning_content: event.text }, finish_reason: null, logprobs: null }]),
        );
      } else if (event.type === "text") {
        started.add(event.index);
        sse.send(content(event.index, event.text, event.logprobs));
      } else if (event.type === "tool_calls") {
        // One fragment per call, carrying its id, name and the whole arguments text.
        const deltas = event.calls.map((call, i) => ({
          index: i,
          id: call.id,
          type: "function" as const,
          function: { name: call.name, arguments: call.arguments },
        }));
        sse.send(
          chunk([
            { index: event.index, delta: { role: "assistant", content: null, tool_calls: deltas }, finish_reason: null, logprobs: null },
          ]),
        );
      } else if (event.type === "finish") {
        if (!started.has(event.index)) {
          started.add(event.index);
          sse.send(content(event.index, ""));
        }
        sse.send(finish(event.index, event.finishReason));
      } else if (event.finishReason !== "cancelled" && includeUsage) {
        sse.send(chunk([], toWireUsage(event.usage)));
      }
    }
  } catch (error) {
    sse.send(toErrorBody(midStreamFailure(request, error)));
  }
  sse.done();
}
