import { z } from "zod";
import { commonRequestFields } from "./common-fields.js";
import { identifier, text } from "./identifiers.js";

/** OpenAI's limits: at most 2,048 inputs a request, none of them empty. */
export const MAX_EMBEDDING_INPUTS = 2048;

const nonEmptyText = text.refine((value) => value.length > 0, "must not be an empty string.");
const tokenIds = z.array(z.number().int().min(0), { error: "must be an array of token ids." }).min(1, "a token array must not be empty.");

/**
 * What is wrong with an `input` no form of the union takes. A list's length is told first: a union
 * that every option refuses says only "Invalid input", without the limit.
 */
function inputProblem(input: unknown): string {
  if (Array.isArray(input) && input.length === 0) return "must hold at least one input (an empty list embeds nothing).";
  if (Array.isArray(input) && input.length > MAX_EMBEDDING_INPUTS)
    return `holds ${input.length} inputs; the limit is ${MAX_EMBEDDING_INPUTS} inputs a request.`;
  return "must be a string, an array of strings, an array of token ids, or an array of token-id arrays.";
}

/**
 * `POST /v1/embeddings`: `input` is a string, an array of strings, an array of token ids, or an
 * array of such arrays. Token ids are the served model's own (its WordPiece vocabulary): another
 * tokenizer's ids (tiktoken's, as LangChain sends by default) mean nothing to it.
 */
export const embeddingsRequestSchema = z.object({
  model: identifier().min(1),
  input: z.union(
    [
      nonEmptyText,
      z
        .array(nonEmptyText)
        .min(1, "'input' must hold at least one input.")
        .max(MAX_EMBEDDING_INPUTS, `at most ${MAX_EMBEDDING_INPUTS} inputs a request.`),
      tokenIds,
      z
        .array(tokenIds)
        .min(1, "'input' must hold at least one input.")
        .max(MAX_EMBEDDING_INPUTS, `at most ${MAX_EMBEDDING_INPUTS} inputs a request.`),
    ],
    { error: (issue) => inputProblem(issue.input) },
  ),
  encoding_format: z.enum(["float", "base64"]).nullish(),
  /** Only the model's native size is served (no Matryoshka truncation): checked against the model. */
  dimensions: z.number().int().min(1).nullish(),
  user: commonRequestFields.user,
  service_tier: commonRequestFields.service_tier,
});

export type EmbeddingsRequestBody = z.infer<typeof embeddingsRequestSchema>;
