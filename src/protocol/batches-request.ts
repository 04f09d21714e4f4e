import { z } from "zod";
import { metadataSchema } from "./common-fields.js";
import { identifier } from "./identifiers.js";

/** `POST /v1/batches`. The endpoint and window are checked by the service, which names what it supports. */
export const createBatchSchema = z.strictObject({
  input_file_id: identifier(),
  endpoint: z.string().max(200),
  completion_window: z.string().max(20),
  metadata: metadataSchema.nullish(),
  output_expires_after: z.unknown().optional(),
});

const limit = (max: number, fallback: number) => z.coerce.number().int().min(1).max(max).default(fallback);

/** `GET /v1/batches`: newest first, `after` the last id of the previous page. */
export const listBatchesQuery = z.strictObject({ limit: limit(100, 20), after: identifier().optional() });

/** `GET /v1/files`. */
export const listFilesQuery = z.strictObject({
  purpose: identifier(64).optional(),
  limit: limit(10_000, 10_000),
  order: z.enum(["asc", "desc"]).default("desc"),
  after: identifier().optional(),
});

/** The form fields of `POST /v1/files` (multipart/form-data), as the OpenAPI document shows them. */
export const uploadFileForm = z.object({
  file: z.string().meta({ format: "binary", description: "The JSONL file." }),
  purpose: z.literal("batch"),
});
