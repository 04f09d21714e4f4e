/** What a request must satisfy before it is admitted: each a 400 naming the parameter. */
import type { Backend, PreparedPrediction, PreparedPrompt } from "../backends/backend.js";
import type { CatalogEntry } from "../catalog/types.js";
import type { OutputConstraint, ToolDefinition } from "../protocol/generation.js";
import { ContextLengthExceeded, InvalidRequest } from "../errors.js";
import type { ChatInput, ChatParam } from "./types.js";
import { toolCallConstraint } from "./tool-calls.js";

/** How the caller's API names one of chat's parameters: errors name what the caller sent. */
export function paramName(input: Pick<ChatInput, "paramNames">, name: ChatParam): string {
  return input.paramNames?.[name] ?? name;
}

/** The parameter that carries the prompt, for errors about it: `messages` in chat (`input` in Responses), `prompt` in legacy completions. */
export function promptParam(input: ChatInput): string {
  return input.prompt.kind === "text" ? "prompt" : paramName(input, "messages");
}

/** max_tokens as asked, or the rest of the context window; either way the whole must fit. */
export function completionBudget(entry: CatalogEntry, backend: Backend, prompt: PreparedPrompt, input: ChatInput): number {
  const requested = input.maxTokens;
  const param = promptParam(input);
  const window = Math.min(backend.contextWindow, entry.context_length);
  // An upper-bound count cannot refuse a prompt: the upstream engine, which tokenizes, checks the window.
  if (prompt.tokenCountIsUpperBound) {
    if (requested !== undefined && requested >= window) throw new ContextLengthExceeded(window, 1, requested, true, param);
    return requested ?? Math.max(1, window - prompt.tokenCount);
  }
  const maxTokens = requested ?? window - prompt.tokenCount;
  if (maxTokens < 1 || prompt.tokenCount + maxTokens > window) {
    throw new ContextLengthExceeded(window, prompt.tokenCount, Math.max(maxTokens, requested ?? 1), false, param);
  }
  return maxTokens;
}

/**
 * Rendering and tokenizing a prompt costs time in proportion to its size; a prompt that cannot fit
 * is refused before that. Every message costs at least one token, and the backend may know a
 * tighter lower bound from the text's size; each raw prompt must fit on its own.
 */
export function checkCheapContextBound(entry: CatalogEntry, backend: Backend, input: ChatInput): void {
  const window = Math.min(backend.contextWindow, entry.context_length);
  const completion = input.maxTokens ?? 1;
  const prompt = input.prompt;
  const atLeast =
    prompt.kind === "text"
      ? Math.max(0, ...prompt.texts.map((text) => backend.minimumTextTokens?.(text) ?? 0))
      : Math.max(prompt.messages.length, backend.minimumPromptTokens?.(prompt.messages) ?? 0);
  if (atLeast + completion > window) throw new ContextLengthExceeded(window, atLeast, completion, true, promptParam(input));
}

/**
 * A prediction's tokens must fit in the context window beside the prompt's, or it is a 400 naming
 * `prediction`. `atLeast`: the count is a lower bound, found before tokenizing. A count that is only
 * an upper bound (an upstream engine tokenizes, and checks) cannot refuse it.
 */
export function checkPredictionLength(
  entry: CatalogEntry,
  backend: Backend,
  prompt: PreparedPrompt,
  prediction: Pick<PreparedPrediction, "tokenCount" | "tokenCountIsUpperBound">,
  atLeast = false,
): void {
  if (prompt.tokenCountIsUpperBound || prediction.tokenCountIsUpperBound) return;
  const window = Math.min(backend.contextWindow, entry.context_length);
  const room = Math.max(0, window - prompt.tokenCount);
  if (prediction.tokenCount <= room) return;
  throw new InvalidRequest(
    `This model's maximum context length is ${window} tokens. However, the prediction is ${atLeast ? "at least " : ""}${prediction.tokenCount} tokens, ` +
      `more than the ${room} that the prompt's ${prompt.tokenCount} tokens leave. Please shorten the prediction.`,
    "prediction",
    "context_length_exceeded",
  );
}

/**
 * Every choice must hold a sequence at once: the choices are admitted together, so one more than
 * the model runs at once would wait for a sequence its own request holds.
 */
export function checkChoiceCount(backend: Backend, choices: number, input: ChatInput): void {
  const slots = backend.stats().slots;
  if (choices <= slots) return;
  const prompt = input.prompt;
  const asked = prompt.kind === "text" ? `${prompt.texts.length} prompts × n=${input.n ?? 1}` : `n=${input.n ?? 1}`;
  throw new InvalidRequest(
    `This request asks for ${choices} choices (${asked}), more than the ${slots} this model generates at once.`,
    prompt.kind === "text" ? "prompt" : "n",
    "too_many_choices",
  );
}

/** The model's catalog tags say what it can do; asking for more is a 400 naming what is missing. */
export function checkCapabilities(entry: CatalogEntry, backend: Backend, input: ChatInput): void {
  const has = (tag: string) => entry.tags.some((t) => t.toLowerCase() === tag.toLowerCase());
  if (input.responseFormat && !has("JSON")) {
    const param = paramName(input, "response_format");
    throw new InvalidRequest(`The model '${entry.id}' does not support JSON output (${param}).`, param, "unsupported_capability");
  }
  if (input.tools?.length && !has("Function")) {
    throw new InvalidRequest(`The model '${entry.id}' does not support function calling (tools).`, "tools", "unsupported_capability");
  }
  if (input.hasImages && !has("Multimodal")) {
    throw new InvalidRequest(
      `The model '${entry.id}' does not support image input (Multimodal).`,
      promptParam(input),
      "unsupported_capability",
    );
  }
  for (const token of input.logitBias?.keys() ?? []) {
    if (backend.vocabularySize > 0 && token >= backend.vocabularySize) {
      throw new InvalidRequest(
        `Invalid 'logit_bias': token id ${token} is outside the model's vocabulary of ${backend.vocabularySize} tokens.`,
        "logit_bias",
        "invalid_value",
      );
    }
  }
}

/** A forced tool call's grammar wins over response_format (OpenAI applies response_format to content only). */
export function outputConstraint(
  input: ChatInput,
  forced: readonly ToolDefinition[],
): { constraint: OutputConstraint | undefined; constraintParam: string | null } {
  if (forced.length > 0) return { constraint: toolCallConstraint(forced), constraintParam: "tools" };
  const format = input.responseFormat;
  if (format?.type === "json_object") return { constraint: { type: "json" }, constraintParam: paramName(input, "response_format") };
  if (format?.type === "json_schema")
    return {
      constraint: { type: "json_schema", schema: format.schema },
      constraintParam: paramName(input, "response_format.json_schema.schema"),
    };
  return { constraint: undefined, constraintParam: null };
}
