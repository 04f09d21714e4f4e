import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { BackendStats } from "../backends/backend.js";
import type { ServiceTier } from "../catalog/types.js";
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

/** Engine scheduling classes as billed tiers. */
const TIER_OF_CLASS = { priority: "priority", standard: "default", flex: "flex", batch: "batch" } as const;

export function createMetrics(load: LoadSource): Metrics {
  const registry = new Registry();
  const labels = ["model_name", "tier"] as const;
  const histogram = (name: string, help: string, buckets: number[]) => new Histogram({ name: `vllm:${name}`, help, labelNames: labels, buckets, registers: [registry] });
  const counter = (name: string, help: string, extra: string[] = []) => new Counter({ name: `vllm:${name}`, help, labelNames: [...labels, ...extra], registers: [registry] });

  const ttft = histogram("time_to_first_token_seconds", "Time to first token, from arrival.", TTFT_BUCKETS);
  const itl = histogram("inter_token_latency_seconds", "Time between successive outputs of one choice.", ITL_BUCKETS);
  const e2e = histogram("e2e_request_latency_seconds", "Request latency, from arrival to the end.", REQUEST_BUCKETS);
  const queue = histogram("request_queue_time_seconds", "Time spent waiting for a sequence.", REQUEST_BUCKETS);
  const cacheQueries = counter("prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.");
  const cacheHits = counter("prefix_cache_hits_total", "Prompt tokens found in the prefix cache.");
  const promptTokens = counter("prompt_tokens_total", "Prompt tokens processed.");
  const generationTokens = counter("generation_tokens_total", "Tokens generated.");
  const success = counter("request_success_total", "Requests finished, by finish reason.", ["finished_reason"]);
  const preemptions = counter("num_preemptions_total", "Generations preempted (their cells dropped, recomputed later).");

  const gauge = (name: string, help: string, labelNames: string[], read: (set: (labels: Record<string, string>, value: number) => void) => void) =>
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
  const byTier = (pick: (stats: BackendStats) => Record<keyof typeof TIER_OF_CLASS, number>) => (set: (labels: Record<string, string>, value: number) => void) => {
    for (const { model, stats } of load()) {
      for (const [schedulingClass, tier] of Object.entries(TIER_OF_CLASS)) set({ model_name: model, tier }, pick(stats)[schedulingClass as keyof typeof TIER_OF_CLASS]);
    }
  };
  gauge("num_requests_running", "Requests holding a sequence.", [...labels], byTier((s) => s.running));
  gauge("num_requests_waiting", "Requests waiting for a sequence.", [...labels], byTier((s) => s.waiting));
  gauge("kv_cache_usage_perc", "Share of KV cells holding tokens (1 = full), idle cached prefixes included.", ["model_name"], (set) => {
    for (const { model, stats } of load()) set({ model_name: model }, stats.kvCacheUsage);
  });

  return {
    contentType: registry.contentType,
    render: () => registry.metrics(),
    request(model: string, tier: ServiceTier): RequestObserver {
      const l = { model_name: model, tier };
      const arrived = performance.now();
      const lastOutput = new Map<number, number>();
      let first = true;
      return {
        admitted(queueMs, prompt, cached) {
          queue.observe(l, queueMs / 1000);
          promptTokens.inc(l, prompt);
          cacheQueries.inc(l, prompt);
          cacheHits.inc(l, cached);
        },
        output(index) {
          const now = performance.now();
          if (first) ttft.observe(l, (now - arrived) / 1000);
          first = false;
          const previous = lastOutput.get(index);
          if (previous !== undefined) itl.observe(l, (now - previous) / 1000);
          lastOutput.set(index, now);
        },
        preempted: () => preemptions.inc(l),
        finished(finishReason, completion) {
          e2e.observe(l, (performance.now() - arrived) / 1000);
          generationTokens.inc(l, completion);
          success.inc({ ...l, finished_reason: finishReason });
        },
      };
    },
  };
}
