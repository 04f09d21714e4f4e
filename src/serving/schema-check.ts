import { checkSchemaDepth, jsonSchemaToGbnf, SchemaError, toolCallGbnf } from "../backends/schema-grammar.js";
import type { ToolDefinition } from "../protocol/generation.js";
import { InvalidRequest } from "../errors.js";
import { paramName } from "./request-checks.js";
import type { ChatInput } from "./types.js";

/**
 * Refuses a schema before the request reserves budget or waits for a sequence: a 400 naming the
 * parameter. The response_format schema and the forced tools' parameters are compiled as the engine
 * will compile them; the parameters of tools that no grammar binds (they only reach the prompt) are
 * checked for depth, so that rendering them cannot overflow the stack.
 */
export function checkSchemas(request: Pick<ChatInput, "responseFormat" | "tools" | "paramNames">, forced: readonly ToolDefinition[]): void {
  const tools = request.tools ?? [];
  const toolParam = (index: number) => `tools[${index}].function.parameters`;
  tools.forEach((tool, index) => {
    if (!forced.includes(tool))
      refuse(
        () => checkSchemaDepth(tool.parameters),
        () => toolParam(index),
      );
  });
  if (forced.length > 0)
    refuse(
      () => toolCallGbnf(forced),
      (error) => toolParam(tools.indexOf(forced[error.tool ?? 0]!)),
    );
  const format = request.responseFormat;
  if (format?.type === "json_schema")
    refuse(
      () => jsonSchemaToGbnf(format.schema),
      () => paramName(request, "response_format.json_schema.schema"),
    );
}

function refuse(check: () => unknown, param: (error: SchemaError) => string): void {
  try {
    check();
  } catch (error) {
    if (!(error instanceof SchemaError)) throw error;
    const name = param(error);
    throw new InvalidRequest(`Invalid schema in '${name}': ${error.message}`, name, "invalid_schema");
  }
}
