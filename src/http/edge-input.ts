import type { FastifyInstance } from "fastify";
import { InvalidRequest, NotFound } from "../errors.js";
import { DEFAULT_MAX_JSON_DEPTH, findBodyFault, isWellFormed } from "../protocol/body-faults.js";
import { CONTROL_CHARS } from "../protocol/identifiers.js";

/**
 * JSON bodies, with rules at the edge that apply to every route (batch lines too: they enter as
 * in-process requests through this same parser):
 *
 * - An empty body is no body. The official Python SDK sends `Content-Type: application/json` with
 *   an empty body for every body-less call (DELETE, cancel), so that must not be a 400. A route
 *   that needs a body answers its own clear 400 for a missing one.
 * - What findBodyFault refuses is a 400 naming the parameter, before anything runs: text that no
 *   storage can hold, keys that would reach an object's prototype, and nesting past `maxDepth`.
 */
export function installJsonBodyParser(app: FastifyInstance, maxDepth = DEFAULT_MAX_JSON_DEPTH): void {
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "") return done(null, undefined);
    let parsed: unknown;
    try {
      // V8's JSON.parse is not recursive: a body nested 200,000 deep parses; findBodyFault bounds it.
      // A leading byte-order mark is skipped, as Fastify's own parser did.
      parsed = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    } catch (error) {
      return done(error as Error, undefined);
    }
    const fault = findBodyFault(parsed, maxDepth);
    if (fault) return done(new InvalidRequest(fault.message, fault.param || null, fault.code), undefined);
    done(null, parsed);
  });
}

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
