import { z } from "zod";

/**
 * The chat request as it arrives on the wire. Unknown fields are ignored, as OpenAI-compatible
 * servers do; known fields are checked for type and range so a mistake names its `param`.
 */
const textPart = z.object({ type: z.literal("text"), text: z.string() });
const content = z.union([z.string(), z.array(textPart)]);

const message = z.object({
  role: z.enum(["system", "developer", "user", "assistant"], {
    error: (issue) => `Invalid value ${JSON.stringify(issue.input)}: 'role' must be one of 'system', 'developer', 'user', 'assistant'.`,
  }),
  content: z.union([content, z.null()]).optional(),
  name: z.string().optional(),
});

const maxTokens = z.number().int().min(1).nullish();

export const chatRequestSchema = z.object({
  model: z.string().min(1),
  messages: z.array(message).min(1, "'messages' must contain at least one message."),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  max_tokens: maxTokens,
  max_completion_tokens: maxTokens,
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  seed: z.number().int().nullish(),
  stop: z.union([z.string(), z.array(z.string().min(1)).max(16)]).nullish(),
  n: z.literal(1, { error: "Only n=1 is supported." }).nullish(),
  user: z.string().nullish(),
  service_tier: z.enum(["auto", "default", "priority", "flex"]).nullish(),
});

export type ChatRequestBody = z.infer<typeof chatRequestSchema>;
export type WireMessage = z.infer<typeof message>;
