import type { z } from "zod";
import { InvalidRequest } from "../errors.js";

/**
 * Validates a body or a query against its schema (protocol/); the first problem is a 400 naming its
 * `param`, with the code chat completions give it.
 */
export function parse<T>(schema: z.ZodType<T>, input: unknown): T {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const param = issue && issue.path.length > 0 ? issue.path.join(".") : null;
  const code = issue?.code === "invalid_type" || issue?.code === "invalid_union" ? "invalid_type" : "invalid_value";
  throw new InvalidRequest(
    param ? `Invalid '${param}': ${issue?.message}` : `Invalid request: ${issue?.message ?? "malformed"}`,
    param,
    code,
  );
}
