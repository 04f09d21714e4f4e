/**
 * What no request body may hold, whatever its route: the checks the JSON body parser runs on every
 * body (http/edge-input.ts), and the Batch API on every line of an input file (batches/validate.ts).
 */

/** Levels of objects and arrays a JSON body may nest when no setting says otherwise (SWITCHYARD_MAX_JSON_DEPTH). */
export const DEFAULT_MAX_JSON_DEPTH = 128;

export interface BodyFault {
  /** Where: `input[0].content`; "" for the body itself. */
  param: string;
  message: string;
  code: "invalid_unicode" | "invalid_value" | "nesting_too_deep";
}

interface Node {
  value: unknown;
  parent: Node | null;
  step: string | number | null;
  depth: number;
}

/** A parameter path (`input[0].content`) from the root down to `node`, or only its first `maxSteps` steps. */
function pathOf(node: Node | null, maxSteps = Infinity): string {
  const steps: Array<string | number> = [];
  for (let at = node; at && at.step !== null; at = at.parent) steps.push(at.step);
  return steps
    .reverse()
    .slice(0, maxSteps)
    .reduce<string>((path, step) => (typeof step === "number" ? `${path}[${step}]` : path ? `${path}.${step}` : step), "");
}

const named = (path: string) => `'${path || "body"}'`;

/** Why a string is no text PostgreSQL and UTF-8 can both hold (a lone surrogate, a NUL); `what` names it in the message. */
function textFault(text: string, path: () => string, what: string): BodyFault | null {
  if (!isWellFormed(text))
    return {
      param: path(),
      code: "invalid_unicode",
      message: `Invalid ${named(path())}: ${what} holds a lone UTF-16 surrogate (not valid Unicode).`,
    };
  if (text.includes("\u0000"))
    return {
      param: path(),
      code: "invalid_value",
      message: `Invalid ${named(path())}: ${what} holds a NUL character (\\u0000), which no stored text can hold.`,
    };
  return null;
}

/**
 * The keys of one object: text as any string, and no `__proto__` (nor a `constructor` holding a
 * `prototype`), which JavaScript would read as the object's prototype wherever the body is copied
 * (the rule of Fastify's own parser, with the parameter named).
 */
function keyFault(value: object, path: () => string): BodyFault | null {
  for (const key of Object.keys(value)) {
    const fault = textFault(key, path, "a key");
    if (fault) return fault;
    const member = (value as Record<string, unknown>)[key];
    const prototypeKey =
      key === "__proto__" || (key === "constructor" && member !== null && typeof member === "object" && Object.hasOwn(member, "prototype"));
    if (prototypeKey)
      return {
        param: path(),
        code: "invalid_value",
        message: `Invalid ${named(path())}: the key '${key}' is not accepted (it names an object's prototype).`,
      };
  }
  return null;
}

/**
 * The first fault of a parsed body, or null: a string or key that is not well-formed Unicode or
 * holds a NUL (PostgreSQL text and JSON cannot), a prototype key, or objects and arrays nested more
 * than `maxDepth` levels (every later walk, JSON.stringify included, is recursive: 10,000 levels
 * would overflow the stack). Iterative, so any depth is walked safely; a path is spelled out only
 * for what is found, and for nesting only its first steps (the field the caller sent).
 */
export function findBodyFault(root: unknown, maxDepth = Infinity): BodyFault | null {
  const stack: Node[] = [{ value: root, parent: null, step: null, depth: 0 }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const { value } = node;
    if (typeof value === "string") {
      const fault = textFault(value, () => pathOf(node), "the text");
      if (fault) return fault;
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (node.depth >= maxDepth) {
      const param = pathOf(node, 2);
      return {
        param,
        code: "nesting_too_deep",
        message: `Invalid ${named(param)}: objects and arrays are nested more than ${maxDepth} levels deep.`,
      };
    }
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], parent: node, step: i, depth: node.depth + 1 });
      continue;
    }
    const fault = keyFault(value, () => pathOf(node));
    if (fault) return fault;
    const entries = Object.entries(value);
    for (let i = entries.length - 1; i >= 0; i--)
      stack.push({ value: entries[i]![1], parent: node, step: entries[i]![0], depth: node.depth + 1 });
  }
  return null;
}

/** String.prototype.isWellFormed (Node 20): no unpaired surrogate code unit. */
export const isWellFormed = (text: string): boolean => (text as string & { isWellFormed(): boolean }).isWellFormed();
