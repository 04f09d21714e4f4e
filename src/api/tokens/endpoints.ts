/**
 * `POST /tokenize` and `POST /detokenize` in vLLM's shape, at the root and under each API prefix:
 * clients count tokens before they send (LangChain's `get_num_tokens`, agents trimming their context).
 */
import { detokenizeRequestSchema, tokenizeRequestSchema, type TokenizeRequestBody } from "../../protocol/tokenize-request.js";
import type { DetokenizeRequestBody } from "../../protocol/tokenize-request.js";
import type { TokenizeInput, TokenService } from "../../serving/token-service.js";
import { toChatMessage, toToolDefinitions } from "../chat/input.js";
import type { Endpoint, EndpointInput, EndpointSpec } from "../endpoint.js";

export const tokenSpecs = {
  tokenize: {
    method: "post",
    path: "/tokenize",
    id: "tokenize",
    summary:
      "Token ids of a prompt, or of chat messages rendered as a chat request renders them (vLLM's shape; authenticated, counted against the request rate, never billed)",
    auth: "key",
    body: tokenizeRequestSchema,
    response: {
      description: "`{count, max_model_len, tokens, token_strs?}`; for messages, `count` is that chat request's `usage.prompt_tokens`.",
    },
    errors: [400, 401, 404, 429, 503],
  },
  detokenize: {
    method: "post",
    path: "/detokenize",
    id: "detokenize",
    summary: "Token ids of a model back into text, special tokens spelled out",
    auth: "key",
    body: detokenizeRequestSchema,
    response: { description: "`{prompt}`" },
    errors: [400, 401, 404, 429, 503],
  },
} satisfies Record<string, EndpointSpec>;

export function tokenEndpoints(tokens: TokenService): Endpoint[] {
  const tokenize: Endpoint<EndpointInput<unknown, unknown, TokenizeRequestBody>> = {
    ...tokenSpecs.tokenize,
    async run(caller, { body }) {
      const result = await tokens.tokenize(caller, toTokenizeInput(body));
      const value = {
        count: result.tokens.length,
        max_model_len: result.maxModelLength,
        tokens: result.tokens,
        ...(result.tokenTexts ? { token_strs: result.tokenTexts } : {}),
      };
      return { type: "json", value, rateLimits: result.rateLimits };
    },
  };
  const detokenize: Endpoint<EndpointInput<unknown, unknown, DetokenizeRequestBody>> = {
    ...tokenSpecs.detokenize,
    async run(caller, { body }) {
      const result = await tokens.detokenize(caller, { model: body.model, tokens: body.tokens });
      return { type: "json", value: { prompt: result.text }, rateLimits: result.rateLimits };
    },
  };
  return [tokenize, detokenize];
}

/** vLLM's defaults: a raw prompt gets the tokenizer's special tokens (BOS); a conversation the assistant turn's opening. */
function toTokenizeInput(body: TokenizeRequestBody): TokenizeInput {
  const base = { model: body.model, withTokenTexts: body.return_token_strs === true };
  if (body.messages)
    return {
      ...base,
      chat: {
        messages: body.messages.map(toChatMessage),
        tools: body.tools ? toToolDefinitions(body.tools) : [],
        addGenerationPrompt: body.add_generation_prompt ?? true,
      },
    };
  return { ...base, prompt: { text: body.prompt ?? "", addSpecialTokens: body.add_special_tokens ?? true } };
}
