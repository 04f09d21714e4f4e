import { PromptTemplateError } from "../engine/chat-template.js";
import { loadModelHost, type ModelHostOptions } from "../engine/model-host.js";
import { UnsupportedSchemaError } from "../engine/json-schema-support.js";
import { QueueFullError, WaitExpiredError } from "../engine/scheduler.js";
import type { EngineEvent, Token } from "../engine/types.js";
import { BackendBusy, BackendWaitExpired, ConstraintRejected, PromptRejected, type Backend, type PreparedPrompt } from "./backend.js";

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
        const { tokens, opensThinking } = host.tokenizeChat(messages, tools, options);
        return { tokens, tokenCount: tokens.length, opensThinking };
      } catch (error) {
        if (error instanceof PromptTemplateError) throw new PromptRejected(error.message);
        throw error;
      }
    },
    async prepareText(text) {
      const tokens = host.tokenizeText(text);
      return { tokens, tokenCount: tokens.length, opensThinking: false };
    },
    async *generate(prompt, params, signal): AsyncGenerator<EngineEvent> {
      try {
        yield* host.generate({ promptTokens: prompt.tokens, ...params }, signal);
      } catch (error) {
        if (error instanceof QueueFullError) throw new BackendBusy(error.message);
        if (error instanceof WaitExpiredError) throw new BackendWaitExpired(error.message);
        if (error instanceof UnsupportedSchemaError) throw new ConstraintRejected(error.message);
        throw error;
      }
    },
    stats: () => host.stats(),
    close: () => host.close(),
  };
}
