import type { z } from "zod";
import { InvalidRequest } from "../errors.js";
import { findBodyFault } from "./body-faults.js";
import { innermostIssue } from "./zod-issues.js";

/**
 * A JSON body's text as every route takes it, a batch line's too (http/edge-input.ts,
 * batches/line-executor.ts): blank text is no body (undefined); text that is not JSON throws the
 * parser's SyntaxError; what findBodyFault refuses is a 400 naming the parameter.
 */
export function parseJsonBody(text: string, maxDepth: number): unknown {
  if (text.trim() === "") return undefined;
  // V8's JSON.parse is not recursive: a body nested 200,000 deep parses; findBodyFault bounds it.
  // A leading byte-order mark is skipped, as Fastify's own parser did.
  const parsed: unknown = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  const fault = findBodyFault(parsed, maxDepth);
  if (fault) throw new InvalidRequest(fault.message, fault.param || null, fault.code);
  return parsed;
}

/** Validates a wire body against its schema; the first problem becomes a 400 naming its `param`. */
export function parseRequest<T>(schema: z.ZodType<T>, body: unknown): T {
  // An empty body (or none) reaches routes as undefined: see json-body.ts.
  if (body === undefined) throw new InvalidRequest("The request body is missing; send a JSON object.", null, "missing_body");
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new InvalidRequest("The request body must be a JSON object.");
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalidFrom(parsed.error, body);
  return parsed.data;
}

/**
 * Zod does not keep the input on an issue, so whether the parameter is missing is read from the
 * body itself: a value of the wrong type is `invalid_type`, never "missing".
 */
function invalidFrom(error: z.ZodError, body: unknown): InvalidRequest {
  const issue = innermostIssue(error.issues[0]!);
  const param = formatPath(issue.path);
  // A union no form of which took the value: missing too when there is no value at all.
  const missing = (issue.code === "invalid_type" || issue.code === "invalid_union") && valueAt(body, issue.path) === undefined;
  if (missing) return new InvalidRequest(`Missing required parameter: '${param}'.`, param || null, "missing_required_parameter");
  const code = issue.code === "invalid_type" || issue.code === "invalid_union" ? "invalid_type" : "invalid_value";
  return new InvalidRequest(`Invalid '${param}': ${issue.message}`, param || null, code);
}

function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let value = body;
  for (const key of path) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((out, key) => (typeof key === "number" ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)), "");
}
