import type { GenerationEvent, Token } from "../protocol/generation.js";
import { sumPerTier, tierTotal } from "../protocol/tiers.js";
import {
  BackendBusy,
  type Backend,
  type BackendStats,
  type GenerationParams,
  type PauseControl,
  type PreparedPrediction,
  type PreparedPrompt,
} from "./backend.js";

interface Instance {
  backend: Backend;
  /** Choice streams handed out and not yet ended. */
  active: number;
  /** performance.now() when `active` last dropped to 0 (or the instance joined). */
  idleSince: number;
  /** Out of rotation: takes no new requests, waits for `active` to reach 0. */
  draining: boolean;
  onIdle: Array<() => void>;
}

/**
 * Several loaded instances of one model as one Backend: each request goes to the instance with
 * the fewest streams in progress. Instances join as they load and leave drained: one taken out of
 * rotation gets no new requests and is handed back once its last stream has ended.
 */
export class BackendPool implements Backend {
  private readonly instances: Instance[] = [];

  get size(): number {
    return this.serving().length;
  }

  get contextWindow(): number {
    return this.any().contextWindow;
  }

  get vocabularySize(): number {
    return this.any().vocabularySize;
  }

  add(backend: Backend): void {
    this.instances.push({ backend, active: 0, idleSince: performance.now(), draining: false, onIdle: [] });
  }

  prepare(...args: Parameters<Backend["prepare"]>): Promise<PreparedPrompt> {
    return this.any().prepare(...args);
  }

  prepareText(...args: Parameters<Backend["prepareText"]>): Promise<PreparedPrompt> {
    return this.any().prepareText(...args);
  }

  /** Every instance runs the same model with the same tokenizer, so a prediction prepared on one runs on any. */
  async preparePrediction(...args: Parameters<NonNullable<Backend["preparePrediction"]>>): Promise<PreparedPrediction> {
    const backend = this.any();
    return backend.preparePrediction ? backend.preparePrediction(...args) : { text: args[0], tokenCount: 0 };
  }

  /**
   * Every instance runs the same model with the same tokenizer, so any one turns tokens back into
   * text (`/detokenize`). Arrow properties: the token service takes them off the backend unbound.
   */
  readonly detokenize = (tokens: readonly Token[]): string => this.tokenizing().detokenize(tokens);
  readonly tokenText = (token: Token): string => this.tokenizing().tokenText(token);

  private tokenizing(): Required<Pick<Backend, "detokenize" | "tokenText">> {
    const { detokenize, tokenText } = this.any();
    if (!detokenize || !tokenText) throw new Error("The deployment's instances do not know their tokenizer.");
    return { detokenize, tokenText };
  }

  minimumPromptTokens(messages: Parameters<Backend["prepare"]>[0]): number {
    return this.any().minimumPromptTokens?.(messages) ?? messages.length;
  }

  minimumTextTokens(text: string): number {
    return this.any().minimumTextTokens?.(text) ?? 0;
  }

  generate(
    prompt: PreparedPrompt,
    choices: readonly GenerationParams[],
    signal: AbortSignal,
    pause?: PauseControl,
  ): AsyncGenerator<GenerationEvent>[] {
    const candidates = this.serving();
    // Only in the moment between a request finding the deployment and its last instance draining.
    if (candidates.length === 0) return choices.map(() => refused(new BackendBusy("The deployment has no running instance right now.")));
    // Every instance runs the same model with the same tokenizer, so a prompt prepared on one runs on any.
    const instance = candidates.reduce((best, next) => (next.active < best.active ? next : best));
    instance.active += choices.length;
    return instance.backend.generate(prompt, choices, signal, pause).map((stream) => tracked(stream, () => this.release(instance)));
  }

  /** Sums over the instances; `slots` is one instance's, since a request's choices run on one. */
  stats(): BackendStats {
    const all = this.instances.map((i) => i.backend.stats());
    return {
      slots: all.length ? Math.min(...all.map((s) => s.slots)) : 0,
      running: sumPerTier(all, (s) => s.running),
      waiting: sumPerTier(all, (s) => s.waiting),
      preemptions: all.reduce((sum, s) => sum + s.preemptions, 0),
      paused: all.reduce((sum, s) => sum + (s.paused ?? 0), 0),
      idleSequences: all.reduce((sum, s) => sum + s.idleSequences, 0),
      kvCacheUsage: all.length ? all.reduce((sum, s) => sum + s.kvCacheUsage, 0) / all.length : 0,
    };
  }

  /** Requests waiting for a sequence on every instance together. */
  waiting(): number {
    return tierTotal(this.stats().waiting);
  }

  /** How long the most idle instance in rotation has had nothing to do (0 when all are busy). */
  longestIdleMs(now = performance.now()): number {
    const idle = this.serving().filter((i) => i.active === 0);
    return idle.length ? Math.max(...idle.map((i) => now - i.idleSince)) : 0;
  }

  /**
   * Takes the least busy instance out of rotation and resolves with it once its streams have
   * ended; the caller closes it. Undefined when none is left.
   */
  async drainOne(): Promise<Backend | undefined> {
    const candidates = this.serving();
    if (candidates.length === 0) return undefined;
    const instance = candidates.reduce((best, next) => (next.active < best.active ? next : best));
    instance.draining = true;
    if (instance.active > 0) await new Promise<void>((resolve) => instance.onIdle.push(resolve));
    this.instances.splice(this.instances.indexOf(instance), 1);
    return instance.backend;
  }

  private release(instance: Instance): void {
    instance.active--;
    if (instance.active > 0) return;
    instance.idleSince = performance.now();
    instance.onIdle.splice(0).forEach((resolve) => resolve());
  }

  private serving(): Instance[] {
    return this.instances.filter((i) => !i.draining);
  }

  private any(): Backend {
    const instance = this.serving()[0] ?? this.instances[0];
    if (!instance) throw new Error("The deployment has no running instance.");
    return instance.backend;
  }

  async close(): Promise<void> {
    const backends = this.instances.splice(0).map((i) => i.backend);
    await Promise.all(backends.map((b) => b.close()));
  }
}

/**
 * A stream that calls `release` exactly once when it ends, however it ends: drained, failed, or
 * returned early, even before its first read (when a generator's body, and so its `finally`, never runs).
 */
function tracked(stream: AsyncGenerator<GenerationEvent>, release: () => void): AsyncGenerator<GenerationEvent> {
  let released = false;
  const end = () => {
    if (released) return;
    released = true;
    release();
  };
  const settle = async (step: Promise<IteratorResult<GenerationEvent>>) => {
    try {
      const result = await step;
      if (result.done) end();
      return result;
    } catch (error) {
      end();
      throw error;
    }
  };
  const wrapper = {
    next: () => settle(stream.next()),
    throw: (error: unknown) => settle(stream.throw(error)),
    return: async (value?: unknown) => {
      try {
        return await stream.return(value as undefined);
      } finally {
        end();
      }
    },
    [Symbol.asyncIterator]() {
      return wrapper;
    },
  };
  return wrapper as unknown as AsyncGenerator<GenerationEvent>;
}

/** A stream refused before it queued: it throws at its first read, like any refusal. */
// biome-ignore lint/correctness/useYield: it only throws, at its first read, as every refusal does
async function* refused(error: Error): AsyncGenerator<GenerationEvent> {
  throw error;
}
