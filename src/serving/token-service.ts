import { CapacityUnavailable, InvalidRequest } from "../errors.js";
import type { RateLimitState } from "../protocol/rate-limit-headers.js";
import type { RequestLimits } from "../limits/ports.js";
import type { ModelRegistry, ServedModel } from "./model-registry.js";
import { requireServedModel, servesEmbeddings } from "./served-model.js";
import type { Caller, ChatMessage, ToolDefinition } from "./types.js";
import { apiErrorOf } from "./backend-refusals.js";
import { countRequest } from "../limits/count-request.js";

export interface TokenizeInput {
  model: string;
  /** A raw text, or a conversation rendered by the chat template (exactly one). */
  prompt?: { text: string; addSpecialTokens: boolean };
  chat?: { messages: ChatMessage[]; tools: ToolDefinition[]; addGenerationPrompt: boolean };
  withTokenTexts: boolean;
}

export interface TokenizeResult {
  tokens: number[];
  /** Each token as text, when asked for. */
  tokenTexts?: string[];
  /** Tokens one request may hold on this model. */
  maxModelLength: number;
  rateLimits?: RateLimitState;
}

export interface TokenService {
  tokenize(caller: Caller, input: TokenizeInput): Promise<TokenizeResult>;
  detokenize(caller: Caller, input: { model: string; tokens: number[] }): Promise<{ text: string; rateLimits?: RateLimitState }>;
}

/** What tokenizing needs of a model, chat or embedding alike. */
interface Tokenizer {
  maxModelLength: number;
  vocabularySize: number;
  tokenize(input: TokenizeInput, fairnessKey: string): Promise<readonly number[]>;
  detokenize(tokens: readonly number[]): string;
  tokenText(token: number): string;
}

/**
 * `/tokenize` and `/detokenize`: the served model's own tokenizer, the chat template rendered as a
 * chat request renders it (so `count` is that request's `prompt_tokens`). Each call counts against
 * the key's request rate like any request; nothing is billed and no ledger row is written.
 */
export function createTokenService({ registry, limits }: { registry: ModelRegistry; limits: RequestLimits }): TokenService {
  const admitted = (caller: Caller, model: ServedModel) => countRequest(limits, caller, model.entry.id);
  return {
    async tokenize(caller, input) {
      const served = requireServedModel(registry, caller, input.model, "any");
      const tokenizer = tokenizerOf(served);
      const rateLimits = await admitted(caller, served);
      const tokens = [...(await tokenizer.tokenize(input, caller.accountId))];
      const tokenTexts = input.withTokenTexts ? tokens.map((token) => tokenizer.tokenText(token)) : undefined;
      return { tokens, maxModelLength: tokenizer.maxModelLength, rateLimits, ...(tokenTexts ? { tokenTexts } : {}) };
    },
    async detokenize(caller, input) {
      const served = requireServedModel(registry, caller, input.model, "any");
      const tokenizer = tokenizerOf(served);
      const outside = input.tokens.findIndex((token) => token >= tokenizer.vocabularySize);
      if (outside >= 0)
        throw new InvalidRequest(
          `Invalid 'tokens[${outside}]': token id ${input.tokens[outside]} is outside the model's vocabulary of ${tokenizer.vocabularySize} tokens.`,
          `tokens[${outside}]`,
          "invalid_value",
        );
      const rateLimits = await admitted(caller, served);
      return { text: tokenizer.detokenize(input.tokens), rateLimits };
    },
  };
}

function tokenizerOf(served: ServedModel): Tokenizer {
  const id = served.entry.id;
  if (servesEmbeddings(served)) {
    const embedder = served.embedder;
    if (!embedder) throw new CapacityUnavailable(`The model '${id}' is still loading; retry shortly.`, 5);
    return {
      maxModelLength: embedder.maxInputTokens,
      vocabularySize: embedder.vocabularySize,
      async tokenize(input) {
        if (!input.prompt)
          throw new InvalidRequest(
            `The model '${id}' is an embedding model: it has no chat template; send 'prompt'.`,
            "messages",
            "model_not_supported",
          );
        return Array.from(await embedder.tokenize(input.prompt.text, { addSpecial: input.prompt.addSpecialTokens }));
      },
      detokenize: (tokens) => embedder.detokenize(tokens),
      tokenText: (token) => embedder.tokenText(token),
    };
  }
  const backend = served.backend;
  if (!backend) throw new CapacityUnavailable(`The model '${id}' is still loading; retry shortly.`, 5);
  const { detokenize, tokenText } = backend;
  if (!detokenize || !tokenText)
    throw new InvalidRequest(
      `The model '${id}' is served by an upstream engine, which tokenizes it: call that engine's /tokenize.`,
      "model",
      "model_not_supported",
    );
  return {
    maxModelLength: backend.contextWindow,
    vocabularySize: backend.vocabularySize,
    async tokenize(input, fairnessKey) {
      const prompt = input.chat
        ? backend.prepare(input.chat.messages, input.chat.tools, { fairnessKey, addGenerationPrompt: input.chat.addGenerationPrompt })
        : input.prompt!.addSpecialTokens
          ? backend.prepareText(input.prompt!.text, { fairnessKey })
          : backend.preparePrediction!(input.prompt!.text, { fairnessKey });
      try {
        // A backend that knows its tokenizer also knows each prompt's tokens (the detokenize check above).
        return (await prompt).tokens ?? [];
      } catch (error) {
        throw apiErrorOf(error, { promptParam: input.chat ? "messages" : "prompt" });
      }
    },
    detokenize,
    tokenText,
  };
}
