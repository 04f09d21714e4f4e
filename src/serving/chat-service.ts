import { randomBytes } from "node:crypto";
import { BackendBusy, PromptRejected } from "../backends/backend.js";
import { requestCost } from "../billing/cost.js";
import { effectivePrices } from "../billing/prices.js";
import type { ChatMessage, EngineEvent } from "../engine/types.js";
import { CapacityUnavailable, ContextLengthExceeded, InvalidRequest, ModelNotFound, RateLimited } from "../errors.js";
import type { ModelRegistry } from "./model-registry.js";

/** Who is asking; the serving layer needs only what scopes the request. */
export interface Caller {
  accountId: string;
  keyId: string;
  allowedModels: string[] | null;
}

export interface ChatInput {
  model: string;
  messages: ChatMessage[];
  /** Absent: up to the rest of the model's context window. */
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  seed?: number;
  stop: string[];
}

export interface Usage {
  promptTokens: number;
  cachedPromptTokens: number;
  completionTokens: number;
  /** US dollars, exact decimal string. */
  cost: string;
}

export type ServingEvent =
  | { type: "text"; text: string }
  | { type: "done"; finishReason: "stop" | "length" | "cancelled"; usage: Usage };

export interface ChatRun {
  id: string;
  created: number;
  model: string;
  promptTokens: number;
  /** Text deltas, then exactly one `done` carrying the usage, even when the caller aborted. */
  events: AsyncGenerator<ServingEvent>;
}

export interface ChatService {
  /**
   * Checks and admits the request, and resolves once generation has started, so that every
   * rejection (unknown model, too long, queue full) reaches the caller before any output.
   */
  start(caller: Caller, input: ChatInput, signal: AbortSignal): Promise<ChatRun>;
}

/** OpenAI's defaults for sampling when the caller sets none. */
const DEFAULT_TEMPERATURE = 1;
const DEFAULT_TOP_P = 1;

export function createChatService(registry: ModelRegistry): ChatService {
  return {
    async start(caller, input, signal) {
      const served = registry.get(input.model);
      if (!served || (caller.allowedModels && !caller.allowedModels.includes(input.model))) throw new ModelNotFound(input.model);
      if (served.state !== "ready" || !served.backend) {
        if (served.state === "failed") throw new CapacityUnavailable(`The model '${input.model}' failed to load: ${served.error ?? "unknown error"}`, 60);
        throw new CapacityUnavailable(`The model '${input.model}' is still loading; retry shortly.`, 5);
      }
      const backend = served.backend;

      const prompt = await backend.prepare(input.messages).catch((error: unknown) => {
        if (error instanceof PromptRejected) throw new InvalidRequest(error.message, "messages");
        throw error;
      });
      const window = Math.min(backend.contextWindow, served.entry.context_length);
      const maxTokens = input.maxTokens ?? window - prompt.tokenCount;
      if (prompt.tokenCount + maxTokens > window || maxTokens < 1) {
        throw new ContextLengthExceeded(window, prompt.tokenCount, Math.max(maxTokens, input.maxTokens ?? 1));
      }

      const generation = backend.generate(
        prompt,
        {
          maxTokens,
          sampling: { temperature: input.temperature ?? DEFAULT_TEMPERATURE, topP: input.topP ?? DEFAULT_TOP_P, seed: input.seed },
          stop: input.stop,
        },
        signal,
      );
      await firstEvent(generation);

      const prices = effectivePrices(served.entry.pricing, "default");
      async function* events(): AsyncGenerator<ServingEvent> {
        for await (const event of generation) {
          if (event.type === "text") yield event;
          else if (event.type === "finish") {
            const tokens = { promptTokens: prompt.tokenCount, cachedPromptTokens: 0, completionTokens: event.completionTokens };
            yield { type: "done", finishReason: event.reason, usage: { ...tokens, cost: requestCost(prices, tokens) } };
          }
        }
      }
      return { id: completionId(), created: Math.floor(Date.now() / 1000), model: input.model, promptTokens: prompt.tokenCount, events: events() };
    },
  };
}

/** Waits for admission (the `started` event), turning a full queue into a 429. */
async function firstEvent(generation: AsyncGenerator<EngineEvent>): Promise<void> {
  try {
    const first = await generation.next();
    if (first.done || first.value.type !== "started") throw new Error("The backend did not start the generation.");
  } catch (error) {
    if (error instanceof BackendBusy) throw new RateLimited(`${error.message} Retry shortly.`, 1, "queue_full");
    throw error;
  }
}

function completionId(): string {
  return `chatcmpl-${randomBytes(18).toString("base64url")}`;
}
