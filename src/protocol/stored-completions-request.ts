import { z } from "zod";
import { metadataSchema } from "./common-fields.js";

/** `POST /chat/completions/{id}`: a stored chat completion's new metadata (null clears it). */
export const updateCompletionBody = z.object({ metadata: metadataSchema.nullable() });
