import type { GenerationEvent, PauseControl } from "../../protocol/generation.js";
import { BackendUnavailable, type Backend, type BackendStats, type GenerationParams } from "../backend.js";
import { fromEngineError } from "../engine-errors.js";
import { createAgent, openStream, probe, ReplicaFailed } from "./http.js";
import { ReplicaPool } from "./replica-pool.js";
import { chatPrompt, textPrompt, type UpstreamPrompt } from "./prompt.js";
import { Replica } from "./replica.js";
import { requestBody } from "./request-body.js";
import { streamEvents } from "./stream-events.js";

export interface UpstreamOptions {
  /** Base URLs (ending where `/chat/completions` lives, e.g. `http://10.0.0.5:8000/v1`). */
  replicas: readonly string[];
  apiKey?: string;
  /** The model name the upstream serves. */
  model: string;
  /** Requests one replica runs at once. */
  maxConcurrency: number;
  contextWindow: number;
  maxWaiting: number;
  flexMaxWaitMs: number;
  /** Send vLLM's `priority` field. */
  sendPriority?: boolean;
  /** How often each replica's health is checked (GET /models). */
  healthIntervalMs?: number;
}

const DEFAULT_HEALTH_INTERVAL_MS = 5_000;

/**
 * An OpenAI-compatible upstream engine (vLLM, SGLang, llama-server, a Switchyard worker) behind the
 * Backend seam: the gateway keeps tiers, routing and metering, the upstream renders, tokenizes and
 * generates. Each choice is one streamed upstream request; a replica that fails before answering
 * 200 is retried on another one (nothing has reached the client then), never after.
 */
export function createUpstreamBackend(options: UpstreamOptions): Backend<UpstreamPrompt> & { checkHealth(): Promise<void> } {
  const replicas = options.replicas.map((url, i) => new Replica(i, url.replace(/\/+$/, ""), options.maxConcurrency));
  const pool = new ReplicaPool(replicas, { maxWaiting: options.maxWaiting, flexMaxWaitMs: options.flexMaxWaitMs });
  const agent = createAgent();
  const bodyOptions = { model: options.model, sendPriority: options.sendPriority ?? false };

  const checkHealth = healthCheck(replicas, pool, agent, options.apiKey);
  const timer = setInterval(() => void checkHealth(), options.healthIntervalMs ?? DEFAULT_HEALTH_INTERVAL_MS);
  timer.unref();

  const upstream: Upstream = { pool, agent, apiKey: options.apiKey, bodyOptions };

  return {
    contextWindow: options.contextWindow,
    vocabularySize: 0, // unknown here: the upstream checks logit_bias ids itself
    checkHealth,
    async prepare(messages, tools = [], promptOptions = {}) {
      return chatPrompt(messages, tools, promptOptions);
    },
    async prepareText(text) {
      return textPrompt(text);
    },
    async preparePrediction(text) {
      // The upstream tokenizes; every token spells at least one byte. It checks the length itself.
      return { text, tokenCount: Buffer.byteLength(text, "utf8"), tokenCountIsUpperBound: true };
    },
    generate(prompt, choices, signal, pause) {
      if (choices.length === 1) return [generation(upstream, prompt, choices[0]!, signal, pause)];
      // The choices share one tier and namespace; their slots are taken together (see Claim.count).
      const first = choices[0]!;
      const slots = pool.acquireAll(
        { tier: first.tier ?? "default", affinityKey: affinityKeyOf(prompt, first), exclude: new Set(), count: choices.length },
        signal,
      );
      slots.catch(() => {}); // each choice's stream throws it at its first read
      return choices.map((params, i) =>
        generation(
          upstream,
          prompt,
          params,
          signal,
          pause,
          slots.then((taken) => taken[i]!),
        ),
      );
    },
    stats: () => upstreamStats(replicas, pool),
    async close() {
      clearInterval(timer);
      await agent.close();
    },
  };
}

/**
 * Probes every replica: one that answers is up again, one that does not is taken down (one already
 * down with requests still running is left as it is); then waiters are dispatched.
 */
function healthCheck(replicas: readonly Replica[], pool: ReplicaPool, agent: ReturnType<typeof createAgent>, apiKey: string | undefined) {
  return async (): Promise<void> => {
    await Promise.all(
      replicas.map(async (replica) => {
        if (await probe(replica.baseUrl, apiKey, agent, 2_000)) replica.succeeded();
        else if (replica.health === "up" || replica.running === 0) replica.failed(true);
      }),
    );
    pool.dispatch();
  };
}

/** What every choice's stream uses: the replica pool, the HTTP agent, the key and the body settings. */
interface Upstream {
  pool: ReplicaPool;
  agent: ReturnType<typeof createAgent>;
  apiKey: string | undefined;
  bodyOptions: { model: string; sendPriority: boolean };
}

/** `firstSlot`: a slot taken for this choice with its siblings (all at once); retries take their own. */
async function* generation(
  upstream: Upstream,
  prompt: UpstreamPrompt,
  params: GenerationParams,
  signal: AbortSignal,
  pause?: PauseControl,
  firstSlot?: Promise<Replica>,
): AsyncGenerator<GenerationEvent> {
  const { pool, agent, apiKey, bodyOptions } = upstream;
  const queuedAt = performance.now();
  const tier = params.tier ?? "default";
  const path = prompt.kind === "chat" ? "/chat/completions" : "/completions";
  const body = JSON.stringify(requestBody(prompt, params, bodyOptions));
  const affinityKey = affinityKeyOf(prompt, params);
  const tried = new Set<Replica>();
  let lastFailure = "";
  for (;;) {
    let replica: Replica;
    try {
      replica = firstSlot && tried.size === 0 ? await firstSlot : await pool.acquire({ tier, affinityKey, exclude: tried }, signal);
    } catch (error) {
      if (error instanceof BackendUnavailable && lastFailure) throw new BackendUnavailable(`${error.message} Last: ${lastFailure}`);
      // The pool's tier queue refuses as the engine's does (a full queue, a flex wait over): mapped in the one place.
      throw fromEngineError(error);
    }
    let opened: Awaited<ReturnType<typeof openStream>>;
    try {
      opened = await openStream(`${replica.baseUrl}${path}`, body, apiKey, agent, signal);
    } catch (error) {
      pool.done(
        replica,
        tier,
        error instanceof ReplicaFailed && error.replicaFault ? "failed" : "neutral",
        error instanceof ReplicaFailed && error.fatal,
      );
      if (!(error instanceof ReplicaFailed)) throw error;
      tried.add(replica);
      lastFailure = `replica ${replica.index}: ${error.message}`;
      continue;
    }
    let outcome: "ok" | "failed" | "neutral" = "neutral";
    try {
      yield { type: "started", queuedMs: performance.now() - queuedAt, cachedTokens: 0 };
      for await (const event of streamEvents(opened.body, signal)) {
        if (event.type === "finish") outcome = event.reason === "cancelled" ? "neutral" : "ok";
        yield event;
        // Paused: the upstream's body is not read, so TCP holds the upstream engine back.
        if (pause?.paused) await resumed(pause, signal);
      }
    } catch (error) {
      outcome = "failed";
      throw error;
    } finally {
      if (outcome !== "ok") opened.body.destroy();
      pool.done(replica, tier, outcome, outcome === "failed");
    }
    return;
  }
}

function upstreamStats(replicas: readonly Replica[], pool: ReplicaPool): BackendStats {
  return {
    slots: replicas.reduce((n, r) => n + r.maxConcurrency, 0),
    running: { ...pool.runningByTier },
    waiting: pool.waitingByTier(),
    preemptions: 0,
    idleSequences: 0,
    kvCacheUsage: 0,
    replicas: replicas.map((r) => ({
      index: r.index,
      health: r.health,
      running: r.running,
      maxConcurrency: r.maxConcurrency,
      served: r.served,
    })),
  };
}

/** Prompts that start the same within one cache namespace (account) prefer the same replica. */
function affinityKeyOf(prompt: UpstreamPrompt, params: GenerationParams): string | undefined {
  return params.cacheNamespace === undefined ? undefined : `${params.cacheNamespace}\u0000${prompt.prefix}`;
}

/** Resolves when `pause` is lifted or `signal` aborts. */
function resumed(pause: PauseControl, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      unsubscribe();
      signal.removeEventListener("abort", done);
      resolve();
    };
    const unsubscribe = pause.subscribe(() => {
      if (!pause.paused) done();
    });
    signal.addEventListener("abort", done, { once: true });
  });
}
