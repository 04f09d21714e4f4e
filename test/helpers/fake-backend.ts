import type { Backend, BackendStats, PreparedPrompt } from "../../src/backends/backend.js";

/** A backend's stats with `slots` sequences, none of them busy. */
export function idleStats(slots: number): BackendStats {
  return {
    slots,
    running: { priority: 0, default: 0, flex: 0, batch: 0 },
    waiting: { priority: 0, default: 0, flex: 0, batch: 0 },
    preemptions: 0,
    idleSequences: 0,
    kvCacheUsage: 0,
  };
}

/**
 * A backend for the faults a real model cannot be made to produce on demand (a decode failing
 * mid-generation, a scripted prediction): a 1,024-token window, a raw text of `textTokens` prompt
 * tokens and a chat of `promptTokens`, `slots` idle sequences. `generate` is the test's; any other
 * member may be overridden.
 */
export function fakeBackend(
  generate: Backend["generate"],
  options: { slots?: number; textTokens?: number; promptTokens?: number } & Partial<Backend> = {},
): Backend {
  const { slots = 1, textTokens = 3, promptTokens = 10, ...overrides } = options;
  return {
    contextWindow: 1024,
    vocabularySize: 0,
    prepareText: async (): Promise<PreparedPrompt> => ({ tokenCount: textTokens, opensThinking: false }),
    prepare: async (): Promise<PreparedPrompt> => ({ tokenCount: promptTokens, opensThinking: false }),
    generate,
    stats: () => idleStats(slots),
    close: async () => {},
    ...overrides,
  };
}
