import type { Token } from "../types.js";

/** A prompt of no tokens, for a model with no BOS token to stand for it. */
export class EmptyPromptError extends Error {}

/**
 * A request samples its first token once its last prompt token is computed, so a prompt of no
 * tokens would hold a sequence and never be scheduled. An empty text (SmolLM2's tokenizer adds no
 * BOS) stands for BOS alone where the model has one, as llama.cpp's own server does; a model
 * without one refuses it.
 */
export function nonEmptyPrompt(tokens: readonly Token[], bos: Token | undefined): readonly Token[] {
  if (tokens.length > 0) return tokens;
  if (bos === undefined)
    throw new EmptyPromptError(
      "The prompt is empty (it has no tokens) and this model has no BOS token to start from; send at least one character.",
    );
  return [bos];
}
