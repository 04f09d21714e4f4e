import { PromptTemplateError } from "../engine/chat-template.js";
import {
  EmptyPromptError,
  loadModelHost,
  QueueFullError,
  StalledError,
  WaitExpiredError,
  type ModelHostOptions,
} from "../engine/model-host.js";
import { SchemaError } from "../engine/grammar/index.js";
import type { EngineEvent, Token } from "../engine/types.js";
import {
  BackendBusy,
  BackendWaitExpired,
  ConstraintRejected,
  EmptyPrompt,
  GenerationStalled,
  PromptRejected,
  type Backend,
  type PreparedPrompt,
} from "./backend.js";

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
        if (error instanceof PromptTemplateError) throw new PromptRejected(error.message);
        throw error;
      }
    },
    async prepareText(text, options) {
      const tokens = await host.tokenizeText(text, options);
      return { tokens, tokenCount: tokens.length, opensThinking: false };
    },
    async preparePrediction(text, options) {
      const tokens = await host.tokenizePrediction(text, options);
      return { text, tokens, tokenCount: tokens.length };
    },
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
    stats: () => host.stats(),
    close: () => host.close(),
  };
}

/** Engine errors as the backend errors serving knows. */
function translate(error: unknown): unknown {
  if (error instanceof QueueFullError) return new BackendBusy(error.message);
  if (error instanceof WaitExpiredError) return new BackendWaitExpired(error.message);
  if (error instanceof SchemaError) return new ConstraintRejected(error.message);
  if (error instanceof EmptyPromptError) return new EmptyPrompt(error.message);
  if (error instanceof StalledError) return new GenerationStalled(error.message);
  return error;
}

async function* backendErrors(events: AsyncGenerator<EngineEvent>): AsyncGenerator<EngineEvent> {
  try {
    yield* events;
  } catch (error) {
    throw translate(error);
  }
}

/** A choice refused before it queued: its stream throws at its first read, like any refusal. */
// eslint-disable-next-line require-yield
async function* failing(error: unknown): AsyncGenerator<EngineEvent> {
  throw translate(error);
}
