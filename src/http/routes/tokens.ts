import type { FastifyInstance } from "fastify";
import { detokenizeRequestSchema, tokenizeRequestSchema, type TokenizeRequestBody } from "../../protocol/tokenize-request.js";
import type { TokenizeInput, TokenService } from "../../serving/token-service.js";
import { callerOf } from "../auth.js";
import { parseRequest } from "../../protocol/parse-request.js";
import { toChatMessage, toToolDefinitions } from "../../api/chat/input.js";
import { exposeRateLimits } from "../rate-limit-headers.js";
import { route, type RouteSpec } from "../route-spec.js";

/** These routes as data: registered below with `route`, collected into the OpenAPI document by openapi.ts. */
export const tokenOperations = {
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
} satisfies Record<string, RouteSpec>;

/**
 * `POST /tokenize` and `POST /detokenize` in vLLM's shape, at the root and under each API prefix
 * (see app.ts): clients count tokens before they send (LangChain's `get_num_tokens`, agents
 * trimming their context).
 */
export function tokenRoutes(app: FastifyInstance, tokens: TokenService): void {
  route(app, tokenOperations.tokenize, async (request, reply) => {
    const body = parseRequest(tokenizeRequestSchema, request.body);
    const result = await tokens.tokenize(callerOf(request), toTokenizeInput(body));
    exposeRateLimits(reply, result);
    return {
      count: result.tokens.length,
      max_model_len: result.maxModelLength,
      tokens: result.tokens,
      ...(result.tokenTexts ? { token_strs: result.tokenTexts } : {}),
    };
  });
  route(app, tokenOperations.detokenize, async (request, reply) => {
    const body = parseRequest(detokenizeRequestSchema, request.body);
    const result = await tokens.detokenize(callerOf(request), { model: body.model, tokens: body.tokens });
    exposeRateLimits(reply, result);
    return { prompt: result.text };
  });
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
