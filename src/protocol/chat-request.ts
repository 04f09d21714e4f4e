import { z } from "zod";
import { commonRequestFields } from "./common-fields.js";
import { identifier, preview, text } from "./identifiers.js";

export { MAX_IDENTIFIER_CHARS, preview } from "./identifiers.js";

/**
 * The chat request as it arrives on the wire. Unknown fields are ignored, as OpenAI-compatible
 * servers do; known fields are checked for type and range so a mistake names its `param`.
 */
const textPart = z.object({ type: z.literal("text"), text: text });
const imagePart = z.object({
  type: z.literal("image_url"),
  image_url: z.union([z.string(), z.object({ url: z.string(), detail: z.string().optional() })]),
});
const contentPart = z.discriminatedUnion("type", [textPart, imagePart]);
const content = z.union([text, z.array(contentPart)]);

const functionName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1 to 64 letters, digits, underscores or dashes.");

const toolCall = z.object({
  id: identifier().min(1),
  type: z.literal("function"),
  function: z.object({ name: functionName, arguments: text }),
});

export const message = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"], {
    error: (issue) => `Invalid value ${preview(issue.input)}: 'role' must be one of 'system', 'developer', 'user', 'assistant', 'tool'.`,
  }),
  content: z.union([content, z.null()]).optional(),
  name: identifier().optional(),
  tool_calls: z.array(toolCall).nullish(),
  tool_call_id: identifier().nullish(),
});

export const tool = z.object({
  type: z.literal("function"),
  function: z.object({
    name: functionName,
    description: text.optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});

const toolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: functionName }) }),
]);

const responseFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    json_schema: z.object({
      name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1 to 64 letters, digits, underscores or dashes."),
      description: text.optional(),
      schema: z.record(z.string(), z.unknown()),
      strict: z.boolean().nullish(),
    }),
  }),
]);

/**
 * OpenAI's Predicted Outputs: the output the caller expects, as text or text parts (joined with
 * nothing between them). Generation drafts from it; the output is the same with or without it.
 */
const prediction = z.object({
  type: z.literal("content"),
  content: z.union([text, z.array(textPart)]),
});

const maxTokens = z.number().int().min(1).nullish();
const REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high"] as const;
const penalty = z.number().min(-2).max(2).nullish();

export const chatRequestSchema = z
  .object({
    model: identifier().min(1),
    messages: z.array(message).min(1, "'messages' must contain at least one message."),
    stream: z.boolean().nullish(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
    max_tokens: maxTokens,
    max_completion_tokens: maxTokens,
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().gt(0).max(1).nullish(),
    top_k: z.number().int().min(-1).nullish(),
    min_p: z.number().min(0).max(1).nullish(),
    presence_penalty: penalty,
    frequency_penalty: penalty,
    repetition_penalty: z.number().gt(0).max(10).nullish(),
    logit_bias: z.record(z.string().regex(/^\d+$/, "keys must be token ids."), z.number().min(-100).max(100)).nullish(),
    seed: z.number().int().nullish(),
    stop: z.union([text, z.array(text.min(1)).max(16)]).nullish(),
    n: z.number().int().min(1).max(8).nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
    response_format: responseFormat.nullish(),
    tools: z.array(tool).max(128).nullish(),
    tool_choice: toolChoice.nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    prediction: prediction.nullish(),
    ...commonRequestFields,
    reasoning_effort: z
      .enum(REASONING_EFFORTS, {
        error: (issue) => `Invalid value ${preview(issue.input)}: must be one of ${REASONING_EFFORTS.map((e) => `'${e}'`).join(", ")}.`,
      })
      .nullish(),
  })
  .superRefine((body, ctx) => {
    if (body.stream_options != null && body.stream !== true) {
      ctx.addIssue({ code: "custom", path: ["stream_options"], message: "'stream_options' is only allowed when 'stream' is true." });
    }
    if (body.top_logprobs != null && body.top_logprobs > 0 && body.logprobs !== true) {
      ctx.addIssue({ code: "custom", path: ["top_logprobs"], message: "'top_logprobs' requires 'logprobs' to be true." });
    }
    if (body.tool_choice != null && body.tool_choice !== "none" && !body.tools?.length) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: "'tool_choice' is only allowed when 'tools' are specified." });
    }
    if (typeof body.tool_choice === "object" && body.tool_choice && body.tools?.length) {
      const name = body.tool_choice.function.name;
      if (!body.tools.some((t) => t.function.name === name)) {
        ctx.addIssue({ code: "custom", path: ["tool_choice"], message: `No tool named '${name}' is in 'tools'.` });
      }
    }
    body.messages.forEach((m, i) => {
      if (m.role === "tool" && !m.tool_call_id)
        ctx.addIssue({ code: "custom", path: ["messages", i, "tool_call_id"], message: "A 'tool' message needs 'tool_call_id'." });
    });
  });

export type ChatRequestBody = z.infer<typeof chatRequestSchema>;
export type WireMessage = z.infer<typeof message>;
export type WireTool = z.infer<typeof tool>;
export type WirePrediction = z.infer<typeof prediction>;
