import { z } from "zod";
import { commonRequestFields } from "./common-fields.js";
import { identifier, text } from "./identifiers.js";

const penalty = z.number().min(-2).max(2).nullish();

/**
 * The legacy text-completions request (`POST /v1/completions`). A prompt is raw text, sent to the
 * model with no chat template. Unknown fields are ignored; known ones are checked like chat's.
 */
export const completionsRequestSchema = z
  .object({
    model: identifier().min(1),
    prompt: z.union([text, z.array(text).min(1, "'prompt' must hold at least one prompt.").max(16)]),
    suffix: z.string().nullish(),
    stream: z.boolean().nullish(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
    /** OpenAI's default for this API is 16. */
    max_tokens: z.number().int().min(1).nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().gt(0).max(1).nullish(),
    presence_penalty: penalty,
    frequency_penalty: penalty,
    logit_bias: z.record(z.string().regex(/^\d+$/, "keys must be token ids."), z.number().min(-100).max(100)).nullish(),
    seed: z.number().int().nullish(),
    stop: z.union([z.string(), z.array(z.string().min(1)).max(16)]).nullish(),
    n: z.number().int().min(1).max(8).nullish(),
    best_of: z.number().int().min(1).max(8).nullish(),
    logprobs: z.number().int().min(0).max(5).nullish(),
    echo: z.boolean().nullish(),
    ...commonRequestFields,
  })
  .superRefine((body, ctx) => {
    if (body.stream_options != null && body.stream !== true) {
      ctx.addIssue({ code: "custom", path: ["stream_options"], message: "'stream_options' is only allowed when 'stream' is true." });
    }
    if (body.suffix) {
      ctx.addIssue({ code: "custom", path: ["suffix"], message: "'suffix' (insertion) is not supported by the models served here." });
    }
    if (body.best_of != null && body.best_of !== (body.n ?? 1)) {
      ctx.addIssue({
        code: "custom",
        path: ["best_of"],
        message: "'best_of' other than 'n' is not supported; every generated choice is returned.",
      });
    }
    if (body.echo && body.logprobs != null) {
      ctx.addIssue({
        code: "custom",
        path: ["echo"],
        message: "'echo' with 'logprobs' is not supported: prompt tokens get no log probabilities here.",
      });
    }
  });

export type CompletionsRequestBody = z.infer<typeof completionsRequestSchema>;

/** Wire shapes of the legacy completion and its stream chunks (the same object, `text` pieces). */
export interface WireCompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>> | null;
  text_offset: number[];
}
