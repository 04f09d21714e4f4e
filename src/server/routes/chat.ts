import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ExactDecimal, stringifyJson } from "../../billing/money-json.js";
import { ServiceError } from "../../errors.js";
import type { ChatCompletion, ChatCompletionChunk, WireFinishReason, WireUsage } from "../../protocol/chat-response.js";
import type { ChatRun, ChatService, Usage } from "../../serving/chat-service.js";
import { callerOf } from "../auth.js";
import { parseChatRequest, toChatInput } from "../chat-input.js";
import { toErrorBody } from "../errors.js";
import { openSse } from "../sse.js";

export function chatRoutes(app: FastifyInstance, chat: ChatService): void {
  app.post("/v1/compat/chat/completions", async (request, reply) => {
    const body = parseChatRequest(request.body);
    const signal = abortOnDisconnect(reply);
    const run = await chat.start(callerOf(request), toChatInput(body), signal);
    if (body.stream) return streamRun(run, reply, request, body.stream_options?.include_usage === true);
    return sendCompletion(run, reply);
  });
}

/** Aborts the generation as soon as the client goes away, so its sequence is freed at once. */
function abortOnDisconnect(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) controller.abort(new Error("client disconnected"));
  });
  return controller.signal;
}

function toWireUsage(usage: Usage): WireUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    estimated_cost: ExactDecimal.of(usage.cost),
  };
}

async function sendCompletion(run: ChatRun, reply: FastifyReply): Promise<FastifyReply> {
  let content = "";
  for await (const event of run.events) {
    if (event.type === "text") {
      content += event.text;
      continue;
    }
    if (event.finishReason === "cancelled") return reply; // the client is gone; nobody to answer
    const completion: ChatCompletion = {
      id: run.id,
      object: "chat.completion",
      created: run.created,
      model: run.model,
      service_tier: run.serviceTier,
      choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: event.finishReason, logprobs: null }],
      usage: toWireUsage(event.usage),
    };
    return reply.type("application/json; charset=utf-8").send(stringifyJson(completion));
  }
  throw new Error("The generation ended without a finish event.");
}

async function streamRun(run: ChatRun, reply: FastifyReply, request: FastifyRequest, includeUsage: boolean): Promise<void> {
  const sse = openSse(reply);
  const chunk = (choices: ChatCompletionChunk["choices"], usage?: WireUsage): ChatCompletionChunk => ({
    id: run.id,
    object: "chat.completion.chunk",
    created: run.created,
    model: run.model,
    service_tier: run.serviceTier,
    choices,
    ...(includeUsage ? { usage: usage ?? null } : {}),
  });
  const content = (text: string) => chunk([{ index: 0, delta: { role: "assistant", content: text }, finish_reason: null, logprobs: null }]);
  const finish = (reason: WireFinishReason) => chunk([{ index: 0, delta: {}, finish_reason: reason, logprobs: null }]);

  try {
    sse.send(content("")); // first byte as soon as generation starts, as OpenAI does
    for await (const event of run.events) {
      if (event.type === "text") sse.send(content(event.text));
      else if (event.finishReason !== "cancelled") {
        sse.send(finish(event.finishReason));
        if (includeUsage) sse.send(chunk([], toWireUsage(event.usage)));
      }
    }
  } catch (error) {
    // Headers are gone already: the error travels as an event, in the same shape as an HTTP error body.
    request.log.error({ err: error }, "generation failed mid-stream");
    const known = error instanceof ServiceError ? error : new ServiceError(500, "server_error", "The generation failed.", "internal_error");
    sse.send(toErrorBody(known));
  }
  sse.done();
}
