import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { stringifyJson } from "../../protocol/money-json.js";
import type { TokenLogprob } from "../../serving/types.js";
import type { WireUsage } from "../../protocol/chat-response.js";
import { completionsRequestSchema, type CompletionsRequestBody, type WireCompletionLogprobs } from "../../protocol/completions-request.js";
import type { ChatInput, ChatRun, ChatService } from "../../serving/types.js";
import { callerOf } from "../auth.js";
import { parseRequest, sharedGenerationFields } from "../chat-input.js";
import { toErrorBody } from "../errors.js";
import { exposeRateLimits } from "../rate-limit-headers.js";
import { OutputGate, openSse, type SseWriter, type StreamLimits } from "../sse.js";
import { traceOf } from "../tracing.js";
import { abortOnDisconnect, midStreamFailure, toWireUsage } from "../runs.js";

/** OpenAI's default completion length for this API. */
const DEFAULT_MAX_TOKENS = 16;

/** Legacy text completions: raw prompts, no chat template, through the same lifecycle as chat. */
export function completionsRoutes(app: FastifyInstance, chat: ChatService, limits: StreamLimits): void {
  app.post("/completions", async (request, reply) => {
    const body = parseRequest(completionsRequestSchema, request.body);
    const prompts = typeof body.prompt === "string" ? [body.prompt] : body.prompt;
    const signal = abortOnDisconnect(reply);
    const gate = new OutputGate();
    const run = await chat.start(callerOf(request), toInput(body, prompts), signal, {
      requestId: request.id,
      api: "completions",
      output: gate,
      trace: traceOf(request),
    });
    exposeRateLimits(reply, run);
    const n = body.n ?? 1;
    // With echo each choice's text starts with its own prompt.
    const echoed = (index: number) => (body.echo ? prompts[Math.floor(index / n)]! : "");
    const wantLogprobs = body.logprobs != null;
    if (body.stream)
      return streamCompletion(run, openSse(reply, { gate, limits }), request, {
        echoed,
        wantLogprobs,
        includeUsage: body.stream_options?.include_usage === true,
      });
    return sendCompletion(run, reply, prompts.length * n, echoed, wantLogprobs);
  });
}

function toInput(body: CompletionsRequestBody, prompts: string[]): ChatInput {
  return {
    model: body.model,
    prompt: { kind: "text", texts: prompts },
    maxTokens: body.max_tokens ?? DEFAULT_MAX_TOKENS,
    ...sharedGenerationFields(body),
    logprobs: body.logprobs != null ? { top: body.logprobs } : undefined,
    ...(body.prompt_cache_key != null ? { promptCacheKey: body.prompt_cache_key } : {}),
  };
}

/** The legacy logprobs shape; `offset` is where this piece's text starts in the choice's text. */
function toLegacyLogprobs(tokens: readonly TokenLogprob[], offset: number): WireCompletionLogprobs {
  const offsets: number[] = [];
  let at = offset;
  for (const t of tokens) {
    offsets.push(at);
    at += t.token.length;
  }
  return {
    tokens: tokens.map((t) => t.token),
    token_logprobs: tokens.map((t) => t.logprob),
    top_logprobs: tokens.map((t) => Object.fromEntries(t.top.map((a) => [a.token, a.logprob]))),
    text_offset: offsets,
  };
}

interface Choice {
  text: string;
  index: number;
  logprobs: WireCompletionLogprobs | null;
  finish_reason: "stop" | "length" | null;
}

const completionObject = (run: ChatRun, choices: Choice[], usage?: WireUsage | null) => ({
  id: run.id,
  object: "text_completion" as const,
  created: run.created,
  model: run.model,
  service_tier: run.serviceTier,
  system_fingerprint: run.systemFingerprint,
  choices,
  ...(usage !== undefined ? { usage } : {}),
});

async function sendCompletion(
  run: ChatRun,
  reply: FastifyReply,
  count: number,
  echoed: (index: number) => string,
  wantLogprobs: boolean,
): Promise<FastifyReply> {
  const choices = Array.from({ length: count }, (_, index) => ({
    text: echoed(index),
    tokens: [] as TokenLogprob[],
    finish: "stop" as "stop" | "length",
  }));
  for await (const event of run.events) {
    if (event.type === "text") {
      choices[event.index]!.text += event.text;
      if (event.logprobs) choices[event.index]!.tokens.push(...event.logprobs);
    } else if (event.type === "finish") {
      choices[event.index]!.finish = event.finishReason === "length" ? "length" : "stop";
    } else if (event.type === "done") {
      if (event.finishReason === "cancelled") return reply;
      const wire = choices.map((c, index) => ({
        text: c.text,
        index,
        logprobs: wantLogprobs ? toLegacyLogprobs(c.tokens, echoed(index).length) : null,
        finish_reason: c.finish,
      }));
      return reply.type("application/json; charset=utf-8").send(stringifyJson(completionObject(run, wire, toWireUsage(event.usage))));
    }
  }
  throw new Error("The generation ended without a finish event.");
}

async function streamCompletion(
  run: ChatRun,
  sse: SseWriter,
  request: FastifyRequest,
  options: { echoed: (index: number) => string; wantLogprobs: boolean; includeUsage: boolean },
): Promise<void> {
  const usageField = options.includeUsage ? null : undefined;
  const written = new Map<number, number>();
  const piece = (index: number, text: string, tokens?: readonly TokenLogprob[]) => {
    const offset = written.get(index) ?? 0;
    written.set(index, offset + text.length);
    const logprobs = options.wantLogprobs ? toLegacyLogprobs(tokens ?? [], offset) : null;
    sse.send(completionObject(run, [{ text, index, logprobs, finish_reason: null }], usageField));
  };
  try {
    for await (const event of run.events) {
      if (event.type === "text") {
        if (!written.has(event.index) && options.echoed(event.index)) piece(event.index, options.echoed(event.index));
        piece(event.index, event.text, event.logprobs);
      } else if (event.type === "finish") {
        if (!written.has(event.index) && options.echoed(event.index)) piece(event.index, options.echoed(event.index));
        const reason = event.finishReason === "length" ? "length" : "stop";
        sse.send(completionObject(run, [{ text: "", index: event.index, logprobs: null, finish_reason: reason }], usageField));
      } else if (event.type === "done" && event.finishReason !== "cancelled" && options.includeUsage) {
        sse.send(completionObject(run, [], toWireUsage(event.usage)));
      }
    }
  } catch (error) {
    sse.send(toErrorBody(midStreamFailure(request, error)));
  }
  sse.done();
}
