import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { stringifyJson } from "../../protocol/money-json.js";
import type { TokenLogprob, ToolCall } from "../../serving/types.js";
import type { ChatCompletion, ChatCompletionChunk, WireFinishReason, WireLogprobs, WireToolCall, WireUsage } from "../../protocol/chat-response.js";
import type { ChatRun, ChatService } from "../../serving/types.js";
import { callerOf } from "../auth.js";
import { parseChatRequest, toChatInput } from "../chat-input.js";
import { toErrorBody } from "../errors.js";
import { abortOnDisconnect, midStreamFailure, toWireUsage } from "../runs.js";
import { OutputGate, openSse, type SseWriter, type StreamLimits } from "../sse.js";

/** Registered under each API prefix (see app.ts), so the paths here are relative to it. */
export function chatRoutes(app: FastifyInstance, chat: ChatService, limits: StreamLimits): void {
  app.post("/chat/completions", async (request, reply) => {
    const body = parseChatRequest(request.body);
    const signal = abortOnDisconnect(reply);
    const input = toChatInput(body);
    const gate = new OutputGate();
    const run = await chat.start(callerOf(request), input, signal, { requestId: request.id, api: "chat.completions", output: gate });
    const logprobs = input.logprobs !== undefined;
    if (body.stream) return streamRun(run, openSse(reply, { gate, limits }), request, body.stream_options?.include_usage === true, logprobs);
    return sendCompletion(run, reply, input.n ?? 1, logprobs);
  });
}

function toWireLogprobs(tokens: readonly TokenLogprob[]): WireLogprobs {
  return {
    content: tokens.map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes, top_logprobs: t.top.map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes })) })),
    refusal: null,
  };
}

function toWireToolCall(call: ToolCall): WireToolCall {
  return { id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } };
}

async function sendCompletion(run: ChatRun, reply: FastifyReply, n: number, logprobs: boolean): Promise<FastifyReply> {
  const choices = Array.from({ length: n }, () => ({ reasoning: "", content: "", logprobs: [] as TokenLogprob[], calls: [] as ToolCall[], finish: "stop" as WireFinishReason }));
  for await (const event of run.events) {
    if (event.type === "reasoning") {
      choices[event.index]!.reasoning += event.text;
    } else if (event.type === "text") {
      const choice = choices[event.index]!;
      choice.content += event.text;
      if (event.logprobs) choice.logprobs.push(...event.logprobs);
    } else if (event.type === "tool_calls") {
      choices[event.index]!.calls.push(...event.calls);
    } else if (event.type === "finish") {
      choices[event.index]!.finish = event.finishReason;
    } else {
      if (event.finishReason === "cancelled") return reply; // the client is gone; nobody to answer
      const completion: ChatCompletion = {
        id: run.id,
        object: "chat.completion",
        created: run.created,
        model: run.model,
        service_tier: run.serviceTier,
        system_fingerprint: run.systemFingerprint,
        choices: choices.map((c, index) => ({
          index,
          message: {
            role: "assistant",
            // No answer after the tool calls or the thinking is null, as vLLM returns it; plain empty output stays "".
            content: c.calls.length > 0 || c.reasoning ? c.content || null : c.content,
            ...(c.reasoning ? { reasoning_content: c.reasoning } : {}),
            ...(c.calls.length > 0 ? { tool_calls: c.calls.map(toWireToolCall) } : {}),
          },
          finish_reason: c.finish,
          logprobs: logprobs ? toWireLogprobs(c.logprobs) : null,
        })),
        usage: toWireUsage(event.usage),
      };
      return reply.type("application/json; charset=utf-8").send(stringifyJson(completion));
    }
  }
  throw new Error("The generation ended without a finish event.");
}

async function streamRun(run: ChatRun, sse: SseWriter, request: FastifyRequest, includeUsage: boolean, logprobs: boolean): Promise<void> {
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
    chunk([{ index, delta: { role: "assistant", content: text }, finish_reason: null, logprobs: logprobs ? toWireLogprobs(tokens ?? []) : null }]);
  const finish = (index: number, reason: WireFinishReason) => chunk([{ index, delta: {}, finish_reason: reason, logprobs: null }]);

  try {
    sse.send(content(0, "")); // first byte as soon as generation starts, as OpenAI does
    started.add(0);
    for await (const event of run.events) {
      if (event.type === "reasoning") {
        started.add(event.index);
        sse.send(chunk([{ index: event.index, delta: { role: "assistant", reasoning_content: event.text }, finish_reason: null, logprobs: null }]));
      } else if (event.type === "text") {
        started.add(event.index);
        sse.send(content(event.index, event.text, event.logprobs));
      } else if (event.type === "tool_calls") {
        // One fragment per call, carrying its id, name and the whole arguments text.
        const deltas = event.calls.map((call, i) => ({ index: i, id: call.id, type: "function" as const, function: { name: call.name, arguments: call.arguments } }));
        sse.send(chunk([{ index: event.index, delta: { role: "assistant", content: null, tool_calls: deltas }, finish_reason: null, logprobs: null }]));
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
