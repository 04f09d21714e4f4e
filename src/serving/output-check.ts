import { needsOutputCheck, violation } from "../backends/schema-grammar.js";
import type { ToolDefinition } from "../protocol/generation.js";
import { ServiceError } from "../errors.js";
import type { ChoiceEvent } from "./types.js";

/**
 * The number keywords that no grammar enforces exactly (output-check.ts in the grammar) are checked
 * on each choice's finished value. A value that breaks one fails the request with a 500
 * `schema_violation` saying where and why (in a stream, an error event after the content), billed
 * for the tokens generated as any failure after the start is; nothing that breaks the schema is
 * passed on as if it held.
 */
export function checkedChoice(
  choice: AsyncGenerator<ChoiceEvent>,
  schema: Record<string, unknown> | undefined,
  tools: readonly ToolDefinition[],
): AsyncGenerator<ChoiceEvent> {
  const checkText = schema !== undefined && needsOutputCheck(schema);
  const checkTools = tools.filter((tool) => needsOutputCheck(tool.parameters));
  if (!checkText && checkTools.length === 0) return choice;
  return checking(choice, checkText ? schema : undefined, checkTools);
}

async function* checking(
  choice: AsyncGenerator<ChoiceEvent>,
  schema: Record<string, unknown> | undefined,
  tools: readonly ToolDefinition[],
): AsyncGenerator<ChoiceEvent> {
  let text = "";
  for await (const event of choice) {
    if (event.type === "text") text += event.text;
    if (event.type === "tool_calls") {
      for (const call of event.calls) {
        const tool = tools.find((t) => t.name === call.name);
        if (tool) refuse(tool.parameters, call.arguments, `tool '${call.name}' arguments`);
      }
    }
    if (event.type === "finish" && event.reason === "stop" && schema) refuse(schema, text, "output");
    yield event;
  }
}

function refuse(schema: Record<string, unknown>, text: string, what: string): void {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return; // Not a complete value (cut short): nothing to check.
  }
  const found = violation(schema, value);
  if (found)
    throw new ServiceError(
      500,
      "server_error",
      `The model's ${what} broke a number keyword of the schema, which is checked after generation: ${found}`,
      "schema_violation",
    );
}
