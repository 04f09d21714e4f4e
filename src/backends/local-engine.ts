import { loadModelHost, type ModelHostOptions } from "../engine/model-host.js";
import type { GenerationEvent, Token } from "../protocol/generation.js";
import type { Backend, PreparedPrompt } from "./backend.js";
import { fromEngineError } from "./engine-errors.js";

interface LocalPrompt extends PreparedPrompt {
  tokens: Token[];
}

/** The embedded llama.cpp engine behind the Backend seam: engine errors become backend errors. */
export async function createLocalEngineBackend(options: ModelHostOptions): Promise<Backend<LocalPrompt>> {
  const host = await loadModelHost(options);
  return {
    contextWindow: host.contextWindow,
    vocabularySize: host.vocabularySize,
    async prepare(messages, tools, options) {
      try {
        const { tokens, opensThinking } = await host.tokenizeChat(messages, tools, options);
        return { tokens, tokenCount: tokens.length, opensThinking };
      } catch (error) {
        throw fromEngineError(error);
      }
    },
    async prepareText(text, options) {
      try {
        const tokens = await host.tokenizeText(text, options);
        return { tokens, tokenCount: tokens.length, opensThinking: false };
      } catch (error) {
        throw fromEngineError(error);
      }
    },
    async preparePrediction(text, options) {
      const tokens = await host.tokenizePrediction(text, options);
      return { text, tokens, tokenCount: tokens.length };
    },
    detokenize: (tokens) => host.detokenize(tokens),
    tokenText: (token) => host.tokenText(token),
    minimumPromptTokens: (messages) => host.minimumPromptTokens(messages),
    minimumTextTokens: (text) => host.minimumTextTokens(text),
    generate(prompt, choices, signal, pause) {
      try {
        const requests = choices.map(({ prediction, ...params }) => ({
          promptTokens: prompt.tokens,
          ...params,
          ...(prediction?.tokens ? { prediction: prediction.tokens } : {}),
        }));
        return host.generate(requests, signal, pause).map(backendErrors);
      } catch (error) {
        return choices.map(() => failing(error));
      }
    },
    addAdapter: (key, path) => host.addAdapter(key, path),
    removeAdapter: (key) => host.removeAdapter(key),
    stats: () => host.stats(),
    close: () => host.close(),
  };
}

async function* backendErrors(events: AsyncGenerator<GenerationEvent>): AsyncGenerator<GenerationEvent> {
  try {
    yield* events;
  } catch (error) {
    throw fromEngineError(error);
  }
}

/** A choice refused before it queued: its stream throws at its first read, like any refusal. */
// biome-ignore lint/correctness/useYield: it only throws, at its first read, as every refusal does
async function* failing(error: unknown): AsyncGenerator<GenerationEvent> {
  throw fromEngineError(error);
}
