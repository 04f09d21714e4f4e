import { z } from "zod";
import { metadataSchema } from "./common-fields.js";
import { identifier } from "./identifiers.js";
import { listPageQuery } from "./list-page.js";

/** `POST /chat/completions/{id}`: a stored chat completion's new metadata (null clears it). */
export const updateCompletionBody = z.object({ metadata: metadataSchema.nullable() });

/** `GET /chat/completions`: the page (`after`, `limit`, `order`, oldest first by default) and a model to list only. */
export const listCompletionsQuery = listPageQuery("asc").extend({ model: identifier().optional() });

/** `GET /chat/completions`'s `metadata[key]=value` filters, under the same rules as stored metadata (no NUL, bounded keys and values). */
export const completionMetadataFilter = z.object({ metadata: metadataSchema });
