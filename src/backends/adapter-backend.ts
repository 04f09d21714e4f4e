import type { Backend, PreparedPrompt } from "./backend.js";

/**
 * A LoRA adapter served as a model of its own: its base model's backend (the same engine, prompts and
 * limits), each generation tagged with the adapter's key. Closing it closes nothing: the base owns the engine.
 */
export function adapterBackend<P extends PreparedPrompt>(base: Backend<P>, key: string): Backend<P> {
  return {
    contextWindow: base.contextWindow,
    vocabularySize: base.vocabularySize,
    prepare: (messages, tools, options) => base.prepare(messages, tools, options),
    prepareText: (text, options) => base.prepareText(text, options),
    ...(base.minimumPromptTokens ? { minimumPromptTokens: (messages) => base.minimumPromptTokens!(messages) } : {}),
    ...(base.minimumTextTokens ? { minimumTextTokens: (text) => base.minimumTextTokens!(text) } : {}),
    // The base's tokenizer is the adapter's: /tokenize and /detokenize answer for an adapter as for its base.
    ...(base.detokenize ? { detokenize: (tokens) => base.detokenize!(tokens) } : {}),
    ...(base.tokenText ? { tokenText: (token) => base.tokenText!(token) } : {}),
    ...(base.preparePrediction ? { preparePrediction: (text, options) => base.preparePrediction!(text, options) } : {}),
    generate: (prompt, choices, signal, pause) =>
      base.generate(
        prompt,
        choices.map((choice) => ({ ...choice, adapter: key })),
        signal,
        pause,
      ),
    stats: () => base.stats(),
    close: async () => {},
  };
}
