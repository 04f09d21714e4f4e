import { z } from "zod";
import { identifier, preview } from "./identifiers.js";
import { REQUESTED_TIERS } from "./tiers.js";

/** OpenAI's metadata: up to 16 string pairs, keys up to 64 characters, values up to 512. */
export const metadataSchema = z
  .record(
    identifier(64),
    z
      .string()
      .max(512, "values must be at most 512 characters.")
      .refine((value) => !value.includes("\u0000"), "must not contain NUL bytes."),
  )
  .refine((m) => Object.keys(m).length <= 16, "must have at most 16 pairs.");

/**
 * Request fields every generating API (chat completions, completions, responses) accepts alike.
 * `safety_identifier`, `metadata` and `verbosity` are accepted and checked, and change nothing here.
 */
export const commonRequestFields = {
  service_tier: z
    .enum(REQUESTED_TIERS, {
      error: (issue) => `Invalid value ${preview(issue.input)}: must be one of ${REQUESTED_TIERS.map((t) => `'${t}'`).join(", ")}.`,
    })
    .nullish(),
  prompt_cache_key: identifier(1024).nullish(),
  safety_identifier: identifier(1024).nullish(),
  user: identifier().nullish(),
  metadata: metadataSchema.nullish(),
  store: z.boolean().nullish(),
  verbosity: z.enum(["low", "medium", "high"]).nullish(),
};
