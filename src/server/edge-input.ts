import type { FastifyInstance } from "fastify";
import { InvalidRequest, NotFound } from "../errors.js";

/**
 * JSON bodies, with two rules at the edge that apply to every route:
 *
 * - An empty body is no body. The official Python SDK sends `Content-Type: application/json` with
 *   an empty body for every body-less call (DELETE, cancel), so that must not be a 400. A route
 *   that needs a body answers its own clear 400 for a missing one.
 * - No string may hold a lone UTF-16 surrogate (`"\ud800"` is valid JSON, but no valid text): it
 *   cannot be encoded as UTF-8, so storage, logs and engines would fail on it later, after output
 *   was generated and billed. It is a 400 naming the parameter, before anything runs.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  // Fastify's own parser, so prototype-poisoning protection stays as it was.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "") return done(null, undefined);
    parseJson(request, text, (error, parsed) => {
      if (error) return done(error, undefined);
      const param = findIllFormedText(parsed);
      if (param !== null) return done(new InvalidRequest(`Invalid '${param || "body"}': the text holds a lone UTF-16 surrogate (not valid Unicode).`, param || null, "invalid_unicode"), undefined);
      done(null, parsed);
    });
  });
}

/** The path (`input[0].content`) of the first string, key or value, that is not well-formed Unicode; null if none. */
export function findIllFormedText(value: unknown, path = ""): string | null {
  if (typeof value === "string") return isWellFormed(value) ? null : path;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findIllFormedText(value[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      const at = path ? `${path}.${key}` : key;
      if (!isWellFormed(key)) return path || "body";
      const found = findIllFormedText(item, at);
      if (found !== null) return found;
    }
  }
  return null;
}

/** Control characters (NUL above all: PostgreSQL text cannot hold it) can be in no id, name or model. */
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

/**
 * A path parameter (`/v1/deployments/{id}`, `/v1/responses/{id}`, `/admin/v1/accounts/{name}`)
 * that could be no id is a 404 here, before it reaches storage (where a NUL was a 500).
 */
export function installPathParamCheck(app: FastifyInstance): void {
  app.addHook("preValidation", async (request) => {
    const params = (request.params ?? {}) as Record<string, unknown>;
    for (const value of Object.values(params)) {
      if (typeof value === "string" && (CONTROL_CHARS.test(value) || !isWellFormed(value))) {
        throw new NotFound("No such object: the id in the request URL holds characters no id has (control characters).");
      }
    }
  });
}

/** String.prototype.isWellFormed (Node 20): no unpaired surrogate code unit. */
const isWellFormed = (text: string): boolean => (text as string & { isWellFormed(): boolean }).isWellFormed();
