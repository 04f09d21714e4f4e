/** `POST /completions`, legacy text completions: raw prompts, no chat template, through the same lifecycle as chat. */
import type { WireUsage } from "../../protocol/chat-response.js";
import { completionsRequestSchema, type CompletionsRequestBody, type WireCompletionLogprobs } from "../../protocol/completions-request.js";
import { stringifyJson } from "../../protocol/money-json.js";
import type { ChatInput, ChatRun, ChatService, TokenLogprob } from "../../serving/types.js";
import { sharedGenerationFields } from "../chat/input.js";
import type { Chunk, Operation, OperationSpec } from "../operation.js";
import { toWireUsage } from "../wire-usage.js";

/** OpenAI's default completion length for this API. */
const DEFAULT_MAX_TOKENS = 16;

export const completionsSpec: OperationSpec<CompletionsRequestBody> = {
  method: "post",
  path: "/completions",
  id: "createCompletion",
  summary: "Legacy text completion (raw prompt, no chat template)",
  auth: "key",
  body: completionsRequestSchema,
  response: { description: "A text_completion object, or server-sent text_completion chunks.", streams: true },
  batchable: true,
  errors: [400, 401, 402, 404, 429, 503],
  kind: "completions",
  traceOperation: "text_completion",
};

/** With echo each choice's text starts with its own prompt. */
type Echoed = (index: number) => string;

export function completionsOperation(chat: ChatService): Operation<CompletionsRequestBody> {
  return {
    ...completionsSpec,
    async run(caller, body, context) {
      const prompts = typeof body.prompt === "string" ? [body.prompt] : body.prompt;
      const run = await chat.start(caller, toInput(body, prompts), context.signal, {
        requestId: context.requestId,
        api: "completions",
        output: context.output,
        trace: context.trace,
      });
      const n = body.n ?? 1;
      const echoed: Echoed = (index) => (body.echo ? prompts[Math.floor(index / n)]! : "");
      const wantLogprobs = body.logprobs != null;
      if (!body.stream)
        return { type: "json", body: await completion(run, prompts.length * n, echoed, wantLogprobs), rateLimits: run.rateLimits };
      const includeUsage = body.stream_options?.include_usage === true;
      return {
        type: "stream",
        chunks: chunks(run, { echoed, wantLogprobs, includeUsage }),
        rateLimits: run.rateLimits,
        doneSentinel: true,
        failure: (error) => ({ data: error }),
      };
    },
  };
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

/** The whole text_completion as JSON text; null when the run was cancelled. */
async function completion(run: ChatRun, count: number, echoed: Echoed, wantLogprobs: boolean): Promise<string | null> {
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
      if (event.finishReason === "cancelled") return null;
      const wire = choices.map((c, index) => ({
        text: c.text,
        index,
        logprobs: wantLogprobs ? toLegacyLogprobs(c.tokens, echoed(index).length) : null,
        finish_reason: c.finish,
      }));
      return stringifyJson(completionObject(run, wire, toWireUsage(event.usage)));
    }
  }
  throw new Error("The generation ended without a finish event.");
}

async function* chunks(run: ChatRun, options: { echoed: Echoed; wantLogprobs: boolean; includeUsage: boolean }): AsyncGenerator<Chunk> {
  const usageField = options.includeUsage ? null : undefined;
  const written = new Map<number, number>();
  const piece = (index: number, text: string, tokens?: readonly TokenLogprob[]): Chunk => {
    const offset = written.get(index) ?? 0;
    written.set(index, offset + text.length);
    const logprobs = options.wantLogprobs ? toLegacyLogprobs(tokens ?? [], offset) : null;
    return { data: completionObject(run, [{ text, index, logprobs, finish_reason: null }], usageField) };
  };
  const echo = (index: number): Chunk[] => (!written.has(index) && options.echoed(index) ? [piece(index, options.echoed(index))] : []);
  for await (const event of run.events) {
    if (event.type === "text") {
      yield* echo(event.index);
      yield piece(event.index, event.text, event.logprobs);
    } else if (event.type === "finish") {
      yield* echo(event.index);
      const reason = event.finishReason === "length" ? "length" : "stop";
      yield { data: completionObject(run, [{ text: "", index: event.index, logprobs: null, finish_reason: reason }], usageField) };
    } else if (event.type === "done" && event.finishReason !== "cancelled" && options.includeUsage) {
      yield { data: completionObject(run, [], toWireUsage(event.usage)) };
    }
  }
}
