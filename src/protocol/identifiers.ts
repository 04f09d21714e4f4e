import { z } from "zod";

/**
 * Identifiers are stored in the ledger and echoed in errors, so they are short, printable text:
 * a NUL byte cannot be stored in PostgreSQL text at all, and a megabyte "model" would be stored
 * (and echoed) as it came.
 */
export const MAX_IDENTIFIER_CHARS = 256;
/**
 * The name of an account's private model (a deployment, an uploaded adapter): like the second half
 * of a catalog id, since it becomes `<account name>/<name>`.
 */
export const PRIVATE_MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Control characters (NUL above all: PostgreSQL text cannot hold it) can be in no id, name or file name. */
export const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
export const identifier = (max = MAX_IDENTIFIER_CHARS) =>
  z
    .string()
    .max(max, `must be at most ${max} characters.`)
    .refine((value) => !CONTROL_CHARS.test(value), "must not contain control characters (NUL, newlines, ...).");
/** Any text that may reach storage or a log: PostgreSQL text cannot hold NUL. */
export const text = z.string().refine((value) => !value.includes("\u0000"), "must not contain NUL bytes.");

/** A short, safe preview of caller input for an error message: never the whole of it. */
export function preview(value: unknown, max = 40): string {
  let json: string;
  try {
    json = JSON.stringify(value) ?? String(value);
  } catch {
    // Input that did not come through the body parser's depth bound (JSON.stringify recurses).
    return Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : typeof value;
  }
  return json.length <= max ? json : `${json.slice(0, max)}...`;
}
