// TEMPORARY bridge until src/engine/grammar/ lands: GBNF text for a constraint.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { normalizeJsonSchema } from "./json-schema-support.js";
import type { OutputConstraint } from "./types.js";

const require = createRequire(import.meta.url);
const root = join(dirname(require.resolve("node-llama-cpp")), "..");
const JSON_GBNF = readFileSync(join(root, "llama/grammars/json.gbnf"), "utf8");
const { getGbnfGrammarForGbnfJsonSchema } = (await import(pathToFileURL(join(root, "dist/utils/gbnfJson/getGbnfGrammarForGbnfJsonSchema.js")).href)) as {
  getGbnfGrammarForGbnfJsonSchema(schema: unknown, options?: { allowNewLines?: boolean; scopePadSpaces?: number }): string;
};

export function grammarText(constraint: OutputConstraint): string {
  if (constraint.type === "json") return JSON_GBNF;
  return getGbnfGrammarForGbnfJsonSchema(normalizeJsonSchema(constraint.schema), { allowNewLines: false, scopePadSpaces: 0 });
}
