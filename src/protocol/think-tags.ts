/**
 * The tags reasoning models (Qwen3, DeepSeek-R1, QwQ, ...) write their thinking between. They are
 * plain text to the engine: special tokens in some vocabularies, several ordinary tokens in others.
 */
export const THINK_OPEN = "<think>";
export const THINK_CLOSE = "</think>";

/**
 * Whether a rendered prompt leaves a `<think>` block open at its end, as templates that start the
 * model's thinking themselves do (`...<｜Assistant｜><think>\n`). A prompt that closes it again
 * (`<think>\n\n</think>\n\n`, Qwen3 with thinking off) does not.
 */
export function promptOpensThinking(prompt: string): boolean {
  return prompt.trimEnd().endsWith(THINK_OPEN);
}
