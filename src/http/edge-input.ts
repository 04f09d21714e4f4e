import type { FastifyInstance } from "fastify";
import { NotFound } from "../errors.js";
import { DEFAULT_MAX_JSON_DEPTH, isWellFormed } from "../protocol/body-faults.js";
import { parseJsonBody } from "../protocol/parse-request.js";
import { CONTROL_CHARS } from "../protocol/identifiers.js";

/**
 * JSON bodies, with rules at the edge that apply to every route (batch lines too: the batch runner
 * parses each line's body with the same parseJsonBody):
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
    let parsed: unknown;
    try {
      parsed = parseJsonBody(text, maxDepth);
    } catch (error) {
      return done(error as Error, undefined);
    }
    done(null, parsed);
  });
}

/**
 * A path parameter (`/v1/deployments/{id}`, `/v1/responses/{id}`, `/admin/v1/accounts/{name}`)
 * that could be no id is a 404 here, before it reaches storage (where a NUL was a 500).
 */
export function installPathParamCheck(app: FastifyInstance): void {
  app.addHook("preValidation", (request, _reply, done) => {
    const params = (request.params ?? {}) as Record<string, unknown>;
    for (const name in params) {
      const value = params[name];
      if (typeof value === "string" && (CONTROL_CHARS.test(value) || !isWellFormed(value))) {
        return done(new NotFound("No such object: the id in the request URL holds characters no id has (control characters)."));
      }
    }
    done();
  });
}
