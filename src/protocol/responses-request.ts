import { z } from "zod";
import { identifier, text } from "./identifiers.js";
import { commonRequestFields } from "./common-fields.js";

/**
 * The Responses API request (`POST /v1/responses`), the parts of it our models can serve. Unknown
 * fields are ignored; known ones are checked so that a mistake names its `param`.
 */
const functionName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1 to 64 letters, digits, underscores or dashes.");

const textPart = z.object({ type: z.enum(["input_text", "output_text", "text"]), text: text });
const messageItem = z.object({
  type: z.literal("message").optional(),
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: z.union([text, z.array(textPart)]),
  id: z.string().optional(),
  status: z.string().optional(),
});
const functionCallItem = z.object({
  type: z.literal("function_call"),
  call_id: z.string().min(1),
  name: functionName,
  arguments: text,
  id: z.string().optional(),
  status: z.string().optional(),
});
const functionCallOutputItem = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1),
  output: z.union([text, z.array(textPart)]),
  id: z.string().optional(),
  status: z.string().optional(),
});
/** A reasoning item sent back is accepted and not shown to the model again, as with chat. */
const reasoningItem = z.object({ type: z.literal("reasoning") }).loose();

export const inputItem = z.union([messageItem, functionCallItem, functionCallOutputItem, reasoningItem]);

const functionTool = z.object({
  type: z.literal("function"),
  name: functionName,
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});

const textFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1 to 64 letters, digits, underscores or dashes."),
    schema: z.record(z.string(), z.unknown()),
    description: z.string().nullish(),
    strict: z.boolean().nullish(),
  }),
]);

const REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high"] as const;

export const responsesRequestSchema = z
  .object({
    model: identifier().min(1),
    input: z.union([text, z.array(inputItem).min(1, "'input' must hold at least one item.")]),
    instructions: text.nullish(),
    previous_response_id: identifier().min(1).nullish(),
    max_output_tokens: z.number().int().min(1).nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().gt(0).max(1).nullish(),
    tools: z.array(functionTool).max(128).nullish(),
    tool_choice: z.union([z.enum(["none", "auto", "required"]), z.object({ type: z.literal("function"), name: functionName })]).nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    text: z.object({ format: textFormat.nullish(), verbosity: z.enum(["low", "medium", "high"]).nullish() }).nullish(),
    reasoning: z.object({ effort: z.enum(REASONING_EFFORTS).nullish(), summary: z.string().nullish() }).nullish(),
    stream: z.boolean().nullish(),
    /** Refused when true (the route says so): every response runs within its request. */
    background: z.boolean().nullish(),
    ...commonRequestFields,
  })
  .superRefine((body, ctx) => {
    const choice = body.tool_choice;
    if (choice != null && choice !== "none" && !body.tools?.length) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: "'tool_choice' is only allowed when 'tools' are specified." });
    }
    if (typeof choice === "object" && choice && body.tools?.length && !body.tools.some((t) => t.name === choice.name)) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: `No tool named '${choice.name}' is in 'tools'.` });
    }
  });

export type ResponsesRequestBody = z.infer<typeof responsesRequestSchema>;
export type ResponsesInputItem = z.infer<typeof inputItem>;
