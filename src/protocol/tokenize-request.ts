import { z } from "zod";
import { message, tool } from "./chat-request.js";
import { identifier, text } from "./identifiers.js";

/** The most token ids one `/detokenize` takes: far above any context window here, far below what would hold the thread. */
export const MAX_DETOKENIZE_TOKENS = 1 << 20;

const flag = z.boolean().nullish();

/**
 * `POST /tokenize` in vLLM's shape: a raw `prompt`, or chat `messages` (with `tools`) rendered by
 * the model's chat template exactly as a chat request renders them. Unknown fields are ignored.
 */
export const tokenizeRequestSchema = z
  .object({
    model: identifier().min(1),
    prompt: text.optional(),
    messages: z.array(message).min(1, "'messages' must contain at least one message.").optional(),
    tools: z.array(tool).max(128).nullish(),
    add_generation_prompt: flag,
    add_special_tokens: flag,
    return_token_strs: flag,
  })
  .refine((body) => (body.prompt === undefined) !== (body.messages === undefined), {
    error: "send exactly one of 'prompt' (a text) or 'messages' (a conversation).",
    path: ["prompt"],
  });

/** `POST /detokenize`: token ids of the named model back into text. */
export const detokenizeRequestSchema = z.object({
  model: identifier().min(1),
  tokens: z
    .array(z.number().int().min(0), { error: "must be an array of token ids." })
    .max(MAX_DETOKENIZE_TOKENS, `must hold at most ${MAX_DETOKENIZE_TOKENS} token ids.`),
});

export type TokenizeRequestBody = z.infer<typeof tokenizeRequestSchema>;
export type DetokenizeRequestBody = z.infer<typeof detokenizeRequestSchema>;
