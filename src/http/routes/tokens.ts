import type { FastifyInstance } from "fastify";
import { detokenizeRequestSchema, tokenizeRequestSchema, type TokenizeRequestBody } from "../../protocol/tokenize-request.js";
import type { TokenizeInput, TokenService } from "../../serving/token-service.js";
import { callerOf } from "../auth.js";
import { parseRequest } from "../../protocol/parse-request.js";
import { toChatMessage, toToolDefinitions } from "../../api/chat/input.js";
import { exposeRateLimits } from "../rate-limit-headers.js";

/**
 * `POST /tokenize` and `POST /detokenize` in vLLM's shape, at the root and under each API prefix
 * (see app.ts): clients count tokens before they send (LangChain's `get_num_tokens`, agents
 * trimming their context).
 */
export function tokenRoutes(app: FastifyInstance, tokens: TokenService): void {
  app.post("/tokenize", async (request, reply) => {
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
  app.post("/detokenize", async (request, reply) => {
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
