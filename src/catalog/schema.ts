/**
 * The zod schema of a catalog file. Prices and multipliers stay decimal strings end to end: a float would
 * silently turn "0.1" into 0.1000000000000000055..., and billing must be exact.
 */
import Big from "big.js";
import { z } from "zod";
import type { CatalogFileEntry } from "./types.js";
import { parseSource } from "./source.js";
import { BERT_PRECISIONS } from "./convert/bert-gguf.js";

const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;
const DECIMAL = /^\d+(\.\d+)?$/;
/** An alias has no slash, so it never reads as `<owner>/<model_name>` (a catalog id or a deployment's). */
export const MODEL_ALIAS = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;
export const CAPABILITY_TAGS = ["JSON", "Function", "Multimodal", "Embedding"] as const;

function decimalString(example: string) {
  const message = `must be a decimal string such as "${example}" (quoted, never a JSON number)`;
  return z.string({ error: message }).regex(DECIMAL, { error: message });
}

const pricingSchema = z.strictObject({
  input: decimalString("0.02"),
  output: decimalString("0.06"),
  cached_input: decimalString("0.01"),
  discount_percent: decimalString("10")
    .refine((value) => new Big(value).lte(100), { error: "must be between 0 and 100" })
    .optional(),
  tiers: z
    .strictObject({
      priority: decimalString("1.5").optional(),
      flex: decimalString("0.8").optional(),
      batch: decimalString("0.5").optional(),
    })
    .optional(),
  dedicated_instance_hour: decimalString("0.36").optional(),
});

const replicaUrl = z
  .string({ error: "must be a URL string" })
  .refine((value) => URL.canParse(value) && ["http:", "https:"].includes(new URL(value).protocol), {
    error: "must be an http(s) URL such as 'http://10.0.0.5:8000/v1'",
  });

const upstreamSchema = z.strictObject({
  type: z.literal("openai", { error: 'must be "openai" (an OpenAI-compatible chat-completions API)' }),
  replicas: z.array(replicaUrl, { error: "must be an array of base URLs" }).min(1, { error: "must name at least one replica" }),
  api_key_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" })
    .optional(),
  model: z.string().min(1, { error: "must not be empty" }).optional(),
  max_concurrency: z
    .number({ error: "must be a number" })
    .int({ error: "must be an integer" })
    .min(1, { error: "must be at least 1" })
    .max(4096)
    .optional(),
  send_priority: z.boolean({ error: "must be true or false" }).optional(),
});

const entrySchema = z
  .strictObject({
    id: z.string({ error: "must be a string" }).regex(MODEL_ID, { error: "must look like '<owner>/<model_name>'" }),
    aliases: z
      .array(
        z
          .string({ error: "must be a string" })
          .regex(MODEL_ALIAS, { error: "must be a short name without a slash, such as 'smollm2-135m'" }),
        {
          error: "must be an array of short names",
        },
      )
      .refine((aliases) => new Set(aliases).size === aliases.length, { error: "must not repeat an alias" })
      .optional(),
    source: z
      .string({ error: "must be a string" })
      .refine((value) => parseSource(value) !== null, {
        error: "must be 'pypi:<package>==<version>', 'pypi-parts:<package>==<version>,<package>==<version>,...' or 'file:<path to .gguf>'",
      })
      .optional(),
    backend: upstreamSchema.optional(),
    context_length: z.number({ error: "must be a number" }).int({ error: "must be an integer" }).positive({ error: "must be positive" }),
    precision: z.string({ error: "must be a string" }).min(1, { error: "must not be empty" }),
    tags: z
      .array(z.enum(CAPABILITY_TAGS, { error: `must be one of ${CAPABILITY_TAGS.join(", ")}` }), { error: "must be an array" })
      .refine((tags) => new Set(tags).size === tags.length, { error: "must not repeat a tag" }),
    pricing: pricingSchema.optional(),
    created: z.number({ error: "must be a number" }).int({ error: "must be an integer" }).nonnegative({ error: "must not be negative" }),
    dedicated: z.boolean({ error: "must be true or false" }).optional(),
    fallback_chat_template: z.string({ error: "must be a path to a Jinja template file" }).min(1).optional(),
    serve_format: z.enum(["f16"], { error: 'must be "f16" (or absent: serve the file as published)' }).optional(),
    expect: z
      .strictObject({
        architecture: z.string().min(1).optional(),
        name: z.string().min(1).optional(),
        tensor_count: z.number().int().positive().optional(),
      })
      .optional(),
    convert: z
      .enum(["sentence-transformers"], {
        error: 'must be "sentence-transformers" (a zipped sentence-transformers BERT folder, converted to GGUF at pull time)',
      })
      .optional(),
    sampling_defaults: z
      .strictObject({
        temperature: z.number({ error: "must be a number from 0 to 2" }).min(0).max(2).optional(),
        top_p: z.number({ error: "must be a number above 0, at most 1" }).gt(0).max(1).optional(),
        top_k: z.number({ error: "must be a whole number of at least 1" }).int().min(1).optional(),
      })
      .optional(),
    pull: z.enum(["on_demand"], { error: 'must be "on_demand" (or absent: pulled with the rest)' }).optional(),
    adapter_of: z
      .string({ error: "must be the id of the catalog model the adapter was trained on" })
      .regex(MODEL_ID, { error: "must look like '<owner>/<model_name>'" })
      .optional(),
  })
  .refine((entry) => entry.pricing !== undefined || entry.adapter_of !== undefined, {
    error: "is required (only an adapter, with adapter_of, may leave it to its base model's)",
    path: ["pricing"],
  })
  .refine((entry) => entry.adapter_of === undefined || (entry.source !== undefined && parseSource(entry.source)?.kind === "file"), {
    error: "an adapter (adapter_of) needs a 'file:' source: a PEFT adapter folder or a GGUF LoRA",
    path: ["source"],
  })
  .refine(
    (entry) =>
      entry.adapter_of === undefined ||
      (entry.convert === undefined && entry.serve_format === undefined && entry.dedicated !== true && entry.pull === undefined),
    { error: "an adapter (adapter_of) takes none of convert, serve_format, dedicated or pull", path: ["adapter_of"] },
  )
  .refine((entry) => entry.convert === undefined || (BERT_PRECISIONS as readonly string[]).includes(entry.precision), {
    error: `a converted model is written in its precision: ${BERT_PRECISIONS.map((p) => `"${p}"`).join(", ")}`,
    path: ["precision"],
  })
  .refine((entry) => entry.dedicated !== true || entry.pricing?.dedicated_instance_hour !== undefined, {
    error: "a model with dedicated: true needs pricing.dedicated_instance_hour (US dollars per instance hour)",
    path: ["pricing", "dedicated_instance_hour"],
  });

/** A model comes from a GGUF (`source`) or from upstream engines (`backend`), never both. */
export const catalogEntrySchema = entrySchema.refine((entry) => (entry.source === undefined) !== (entry.backend === undefined), {
  error: "needs exactly one of 'source' (a GGUF to run here) or 'backend' (upstream engines that serve it)",
  path: ["source"],
});

export const catalogFileSchema = z.strictObject({
  models: z.array(catalogEntrySchema, { error: "must be an array of model entries" }),
});

// Fails to compile if the schema and the hand-written CatalogEntry type drift apart.
type SchemaEntry = z.infer<typeof catalogEntrySchema>;
const _schemaMatchesType: [SchemaEntry extends CatalogFileEntry ? true : false, CatalogFileEntry extends SchemaEntry ? true : false] = [
  true,
  true,
];
void _schemaMatchesType;
