import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { BackendStats } from "../backends/backend.js";
import { SERVICE_TIERS, type PerTier, type ServiceTier } from "../protocol/tiers.js";
import type { RequestObserver, ServingMetrics } from "../serving/ports.js";

/**
 * Prometheus metrics under vLLM's names (`vllm:` prefix, `model_name` label) so dashboards built for
 * vLLM work unchanged; `tier` is added where it applies. Latency buckets are vLLM's.
 */
export interface Metrics extends ServingMetrics {
  /** The exposition text for GET /metrics. */
  render(): Promise<string>;
  readonly contentType: string;
}

/** The engine's live load, read at scrape time. */
export type LoadSource = () => Array<{ model: string; stats: BackendStats }>;

const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const REQUEST_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];

export function createMetrics(load: LoadSource): Metrics {
  const registry = new Registry();
  const instruments = requestInstruments(registry);
  loadGauges(registry, load);
  return {
    contentType: registry.contentType,
    render: () => registry.metrics(),
    request: (model: string, tier: ServiceTier) => observeRequest(instruments, { model_name: model, tier }),
  };
}

const LABELS = ["model_name", "tier"] as const;

/** The per-request histograms and counters. */
function requestInstruments(registry: Registry) {
  const histogram = (name: string, help: string, buckets: number[]) =>
    new Histogram({ name: `vllm:${name}`, help, labelNames: LABELS, buckets, registers: [registry] });
  const counter = (name: string, help: string, extra: string[] = []) =>
    new Counter({ name: `vllm:${name}`, help, labelNames: [...LABELS, ...extra], registers: [registry] });
  return {
    ttft: histogram("time_to_first_token_seconds", "Time to first token, from arrival.", TTFT_BUCKETS),
    itl: histogram("inter_token_latency_seconds", "Time between successive outputs of one choice.", ITL_BUCKETS),
    e2e: histogram("e2e_request_latency_seconds", "Request latency, from arrival to the end.", REQUEST_BUCKETS),
    queue: histogram("request_queue_time_seconds", "Time spent waiting for a sequence.", REQUEST_BUCKETS),
    cacheQueries: counter("prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache."),
    cacheHits: counter("prefix_cache_hits_total", "Prompt tokens found in the prefix cache."),
    promptTokens: counter("prompt_tokens_total", "Prompt tokens processed."),
    generationTokens: counter("generation_tokens_total", "Tokens generated."),
    success: counter("request_success_total", "Requests finished, by finish reason.", ["finished_reason"]),
    preemptions: counter("num_preemptions_total", "Generations preempted (their cells dropped, recomputed later)."),
    // Speculative decoding, every draft source together (a request's prediction, prompt lookup).
    drafts: counter("spec_decode_num_drafts_total", "Steps in which a request carried draft tokens."),
    draftTokens: counter("spec_decode_num_draft_tokens_total", "Draft tokens verified."),
    acceptedTokens: counter("spec_decode_num_accepted_tokens_total", "Draft tokens accepted."),
  };
}

/** Gauges of the engine's live load, read from `load` at scrape time. */
function loadGauges(registry: Registry, load: LoadSource): void {
  type Setter = (labels: Record<string, string>, value: number) => void;
  const gauge = (name: string, help: string, labelNames: string[], read: (set: Setter) => void) =>
    new Gauge({
      name: `vllm:${name}`,
      help,
      labelNames,
      registers: [registry],
      collect() {
        this.reset();
        read((l, value) => this.set(l, value));
      },
    });
  const byTier = (pick: (stats: BackendStats) => PerTier<number>) => (set: Setter) => {
    for (const { model, stats } of load()) {
      for (const tier of SERVICE_TIERS) set({ model_name: model, tier }, pick(stats)[tier]);
    }
  };
  gauge(
    "num_requests_running",
    "Requests holding a sequence.",
    [...LABELS],
    byTier((s) => s.running),
  );
  gauge(
    "num_requests_waiting",
    "Requests waiting for a sequence.",
    [...LABELS],
    byTier((s) => s.waiting),
  );
  new Gauge({
    name: "switchyard:priority_saturated",
    help: "1 while priority requests wait with no lower-tier sequence left to preempt: priority's own load exceeds the model's sequences.",
    labelNames: ["model_name"],
    registers: [registry],
    collect() {
      this.reset();
      for (const { model, stats } of load())
        if (stats.prioritySaturated !== undefined) this.set({ model_name: model }, stats.prioritySaturated ? 1 : 0);
    },
  });
  gauge("kv_cache_usage_perc", "Share of KV cells holding tokens (1 = full), idle cached prefixes included.", ["model_name"], (set) => {
    for (const { model, stats } of load()) set({ model_name: model }, stats.kvCacheUsage);
  });
}

/** One request's observer: latencies from its arrival, token counts, its finish. */
function observeRequest(m: ReturnType<typeof requestInstruments>, l: { model_name: string; tier: ServiceTier }): RequestObserver {
  const arrived = performance.now();
  const lastOutput = new Map<number, number>();
  let first = true;
  return {
    admitted(queueMs, prompt, cached) {
      m.queue.observe(l, queueMs / 1000);
      m.promptTokens.inc(l, prompt);
      m.cacheQueries.inc(l, prompt);
      m.cacheHits.inc(l, cached);
    },
    output(index) {
      const now = performance.now();
      if (first) m.ttft.observe(l, (now - arrived) / 1000);
      first = false;
      const previous = lastOutput.get(index);
      if (previous !== undefined) m.itl.observe(l, (now - previous) / 1000);
      lastOutput.set(index, now);
    },
    preempted: () => m.preemptions.inc(l),
    speculated(counts) {
      m.drafts.inc(l, counts.drafts);
      m.draftTokens.inc(l, counts.draftTokens);
      m.acceptedTokens.inc(l, counts.acceptedTokens);
    },
    finished(finishReason, completion) {
      m.e2e.observe(l, (performance.now() - arrived) / 1000);
      m.generationTokens.inc(l, completion);
      m.success.inc({ ...l, finished_reason: finishReason });
    },
  };
}
