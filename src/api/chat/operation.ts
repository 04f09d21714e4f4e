/**
 * `POST /chat/completions`: the body becomes the service's input, the run's events become one
 * `chat.completion` (JSON) or its chunks (stream); with `store: true` the completion is kept. Streamed
 * `role`: OpenAI sends it in each choice's first chunk only, and so do `/v1` and `/v1/openai`; the
 * specification's `/v1/compat` puts it in every content chunk (the context's `roleInEveryChunk`).
 */
import type { ChatCompletion } from "../../protocol/chat-response.js";
import { chatRequestSchema, type ChatRequestBody } from "../../protocol/chat-request.js";
import { stringifyJson } from "../../protocol/money-json.js";
import type { ChatRun, ChatService } from "../../serving/types.js";
import type { Chunk, Operation, OperationContext, OperationResult, OperationSpec } from "../operation.js";
import { CompletionAssembler } from "./assembler.js";
import { chunkShapes, eventChunks } from "./chunks.js";
import type { CompletionStore, StoredCompletion } from "./completion-store.js";
import { toChatInput } from "./input.js";

export const chatSpec: OperationSpec<ChatRequestBody> = {
  method: "post",
  path: "/chat/completions",
  id: "createChatCompletion",
  summary: "Chat completion",
  auth: "key",
  body: chatRequestSchema,
  response: { description: "A chat.completion object, or with `stream: true` server-sent chat.completion.chunk events.", streams: true },
  batchable: true,
  errors: [400, 401, 402, 404, 413, 415, 429, 503],
  kind: "chat.completions",
  traceOperation: "chat",
};

/** Keeps a finished completion; called before the client gets the last of it. */
type StoreCompletion = (completion: ChatCompletion, streamed: boolean) => Promise<void>;

export function chatOperation(chat: ChatService, completions?: CompletionStore): Operation<ChatRequestBody> {
  return {
    ...chatSpec,
    async run(caller, body, context) {
      const input = toChatInput(body);
      const run = await chat.start(caller, input, context.signal, {
        requestId: context.requestId,
        api: "chat.completions",
        output: context.output,
        trace: context.trace,
      });
      const logprobs = input.logprobs !== undefined;
      const store = body.store === true && completions ? storing(completions, caller.accountId, body, run, context.logError) : null;
      const n = input.n ?? 1;
      if (!body.stream) return { type: "json", body: await completion(run, n, logprobs, store), rateLimits: run.rateLimits };
      const options = {
        includeUsage: body.stream_options?.include_usage === true,
        logprobs,
        roleInEveryChunk: context.roleInEveryChunk === true,
      };
      return streamed(run, chunks(run, store, n, options));
    },
  };
}

function streamed(run: ChatRun, chunks: AsyncIterable<Chunk>): OperationResult {
  return { type: "stream", chunks, rateLimits: run.rateLimits, doneSentinel: true, failure: (error) => ({ data: error }) };
}

/** The completion as JSON text; null when the run was cancelled (the client is gone; nobody to answer). */
async function completion(run: ChatRun, n: number, logprobs: boolean, store: StoreCompletion | null): Promise<string | null> {
  const assembler = new CompletionAssembler(run, n, logprobs);
  for await (const event of run.events) {
    const completion = assembler.apply(event);
    if (completion) {
      await store?.(completion, false);
      return stringifyJson(completion);
    }
    if (event.type === "done") return null;
  }
  throw new Error("The generation ended without a finish event.");
}

async function* chunks(
  run: ChatRun,
  store: StoreCompletion | null,
  n: number,
  options: Record<"includeUsage" | "logprobs" | "roleInEveryChunk", boolean>,
): AsyncGenerator<Chunk> {
  const assembler = store ? new CompletionAssembler(run, n, options.logprobs) : null;
  const shapes = chunkShapes(run, options);
  const started = new Set<number>([0]);
  yield { data: shapes.content(0, "") }; // first byte as soon as generation starts, as OpenAI does
  for await (const event of run.events) {
    const completion = assembler?.apply(event);
    // Stored before the stream ends, so the client may retrieve it as soon as it has read [DONE].
    if (completion) await store!(completion, true);
    for (const chunk of eventChunks(event, shapes, started, options.includeUsage)) yield { data: chunk };
  }
}

function storing(
  store: CompletionStore,
  accountId: string,
  body: ChatRequestBody,
  run: ChatRun,
  logError: OperationContext["logError"],
): StoreCompletion {
  return async (completion, streamed) => {
    const record: StoredCompletion = {
      id: completion.id,
      model: completion.model,
      metadata: body.metadata ?? {},
      messages: body.messages as StoredCompletion["messages"],
      body: stringifyJson(completion),
    };
    try {
      await store.save(accountId, record);
    } catch (error) {
      // Unanswered, a request's ledger row must not say completed; a stream has delivered its output already.
      if (!streamed)
        await run
          .undelivered("completion_not_stored")
          .catch((failure: unknown) => logError("could not mark the ledger row failed", failure));
      throw error;
    }
  };
}
