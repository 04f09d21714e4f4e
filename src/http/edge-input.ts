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

/**
 * The path (`input[0].content`) of the first string, key or value, that is not well-formed Unicode;
 * null if none. Iterative, so a body nested thousands of levels deep (a schema the grammar will
 * refuse by name) cannot overflow the stack here; a path is spelled out only for what is found.
 */
export function findIllFormedText(root: unknown): string | null {
  interface Node {
    value: unknown;
    parent: Node | null;
    step: string | number | null;
  }
  const pathOf = (node: Node | null): string => {
    const steps: Array<string | number> = [];
    for (let at = node; at && at.step !== null; at = at.parent) steps.push(at.step);
    return steps.reverse().reduce<string>((path, step) => (typeof step === "number" ? `${path}[${step}]` : path ? `${path}.${step}` : step), "");
  };
  const stack: Node[] = [{ value: root, parent: null, step: null }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const { value } = node;
    if (typeof value === "string") {
      if (!isWellFormed(value)) return pathOf(node);
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], parent: node, step: i });
    } else if (value !== null && typeof value === "object") {
      const entries = Object.entries(value);
      for (const [key] of entries) if (!isWellFormed(key)) return pathOf(node) || "body";
      for (let i = entries.length - 1; i >= 0; i--) stack.push({ value: entries[i]![1], parent: node, step: entries[i]![0] });
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
