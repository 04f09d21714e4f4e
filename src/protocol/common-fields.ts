import { z } from "zod";

/** OpenAI's metadata: up to 16 string pairs, keys up to 64 characters, values up to 512. */
export const metadataSchema = z
  .record(z.string().max(64, "keys must be at most 64 characters."), z.string().max(512, "values must be at most 512 characters."))
  .refine((m) => Object.keys(m).length <= 16, "must have at most 16 pairs.");

const SERVICE_TIERS = ["auto", "default", "priority", "flex", "scale", "fast"] as const;

/**
 * Request fields every generating API (chat completions, completions, responses) accepts alike.
 * `safety_identifier`, `metadata` and `verbosity` are accepted and checked, and change nothing here.
 */
export const commonRequestFields = {
  service_tier: z
    .enum(SERVICE_TIERS, { error: (issue) => `Invalid value ${JSON.stringify(issue.input)}: must be one of ${SERVICE_TIERS.map((t) => `'${t}'`).join(", ")}.` })
    .nullish(),
  prompt_cache_key: z.string().max(1024).nullish(),
  safety_identifier: z.string().max(1024).nullish(),
  user: z.string().nullish(),
  metadata: metadataSchema.nullish(),
  store: z.boolean().nullish(),
  verbosity: z.enum(["low", "medium", "high"]).nullish(),
};
