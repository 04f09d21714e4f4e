import { createEmbeddingHost, type Embedded, type EmbeddingHost, type EmbeddingHostOptions } from "../engine/embedding/embedding-host.js";
import { fromEngineError } from "./engine-errors.js";

/**
 * What serving needs from a sentence-embedding model: the engine's embedding host, whose queue-full
 * error this seam turns into the backends' BackendBusy (serving knows nothing of the engine).
 */
export type EmbeddingBackend = EmbeddingHost;
export type { Embedded };

export async function createLocalEmbeddingBackend(options: EmbeddingHostOptions): Promise<EmbeddingBackend> {
  const host = await createEmbeddingHost(options);
  return {
    ...host,
    async embed(inputs, tier, signal, json) {
      try {
        return await host.embed(inputs, tier, signal, json);
      } catch (error) {
        throw fromEngineError(error);
      }
    },
  };
}
