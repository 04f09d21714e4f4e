import { useEffect, useRef, useState } from "preact/hooks";
import { ChartCanvas } from "../chart.js";
import { ErrorBox } from "../feedback.js";
import { buckets, parseMetrics, quantileBetween, total, type Sample } from "../prometheus.js";
import type { ServiceTier, WireHealth, WireHealthModel as HealthModel } from "../wire.js";

interface Scrape {
  at: number;
  samples: Sample[];
}

const POLL_MS = 5_000;
const WINDOW_MS = 5 * 60_000;
const TTFT = "vllm:time_to_first_token_seconds";
/** The tiers a request can ask for, in scheduling order (Batch API lines are not listed on this page). */
const TIERS: readonly ServiceTier[] = ["priority", "default", "flex"];

/**
 * Live engine state for operators, from /health and /metrics every 5 s. Rates and TTFT
 * quantiles are over the last 5 minutes: the difference between the newest scrape and the
 * oldest one kept.
 */
export function EnginesPage() {
  const [health, setHealth] = useState<WireHealth | null>(null);
  const [error, setError] = useState<string | null>(null);
  const scrapes = useRef<Scrape[]>([]);
  const [, setTick] = useState(0);

  useEffect(() => {
    let stopped = false;
    const poll = async () => {
      try {
        const [h, m] = await Promise.all([fetch("/health", { cache: "no-store" }), fetch("/metrics", { cache: "no-store" })]);
        const healthBody = (await h.json()) as WireHealth;
        const samples = parseMetrics(await m.text());
        if (stopped) return;
        const now = Date.now();
        scrapes.current = [...scrapes.current.filter((s) => now - s.at <= WINDOW_MS), { at: now, samples }];
        setHealth(healthBody);
        setError(null);
        setTick((t) => t + 1);
      } catch (failure) {
        if (!stopped) setError(`Could not read /health or /metrics: ${(failure as Error).message}`);
      }
    };
    void poll();
    const timer = setInterval(() => void poll(), POLL_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);

  const list = scrapes.current;
  return (
    <section class="page">
      <div class="page-head">
        <h1>Engines</h1>
        <span class={`status status-${health?.status ?? "loading"}`}>{health?.status ?? "…"}</span>
      </div>
      <p class="muted" data-testid="engines-window">
        Live from /health and /metrics every 5 s.{" "}
        {list.length < 2
          ? "Rates and TTFT appear from the second scrape on."
          : `Rates and TTFT over the last ${formatWindow(windowMs(list))} (up to 5 min kept).`}
      </p>
      <ErrorBox error={error} />
      <div class="engine-grid">
        {health?.models.map((model) => (
          <EngineCard key={model.id} model={model} scrapes={list} />
        ))}
      </div>
    </section>
  );
}

function formatWindow(msSpan: number): string {
  return msSpan < 60_000 ? `${Math.round(msSpan / 1000)} s` : `${(msSpan / 60_000).toFixed(1)} min`;
}

function windowMs(list: Scrape[]): number {
  return list.length > 1 ? list[list.length - 1]!.at - list[0]!.at : 0;
}

function EngineCard({ model, scrapes }: { model: HealthModel; scrapes: Scrape[] }) {
  const first = scrapes[0];
  const last = scrapes[scrapes.length - 1];
  const match = { model_name: model.id };
  const seconds = windowMs(scrapes) / 1000;
  const rate = (name: string) =>
    first && last && seconds > 0 ? (total(last.samples, name, match) - total(first.samples, name, match)) / seconds : null;
  const ttft = (q: number) =>
    first && last && first !== last ? quantileBetween(buckets(first.samples, TTFT, match), buckets(last.samples, TTFT, match), q) : null;
  const kv = Number(model.kv_cache_usage ?? 0);
  const history = scrapes.slice(1).map((s, i) => {
    const prev = scrapes[i]!;
    const dt = (s.at - prev.at) / 1000;
    return dt > 0
      ? (total(s.samples, "vllm:generation_tokens_total", match) - total(prev.samples, "vllm:generation_tokens_total", match)) / dt
      : 0;
  });
  return (
    <article class="card engine" data-model={model.id}>
      <header class="model-head">
        <h2>{model.id}</h2>
        <span class={`status status-${model.state}`}>{model.state}</span>
      </header>
      {model.error ? <div class="error-box">{model.error}</div> : null}
      <table class="data compact">
        <thead>
          <tr>
            <th>Tier</th>
            <th class="num">Running</th>
            <th class="num">Waiting</th>
          </tr>
        </thead>
        <tbody>
          {TIERS.map((tier) => (
            <tr key={tier}>
              <td>{tier}</td>
              <td class="num">{model.by_tier?.running[tier] ?? 0}</td>
              <td class="num">{model.by_tier?.waiting[tier] ?? 0}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <dl class="facts">
        <dt>Sequences</dt>
        <dd>
          {model.sequences ?? "–"} ({model.idle_cached_sequences ?? 0} idle cached)
        </dd>
        <dt>KV cache</dt>
        <dd>
          <meter min={0} max={1} value={kv} /> {(kv * 100).toFixed(1)}%
        </dd>
        <dt>Preemptions</dt>
        <dd>{model.preemptions ?? 0}</dd>
        <dt>Tokens/s</dt>
        <dd data-testid="engine-tps">{fixed(rate("vllm:generation_tokens_total"), 1)}</dd>
        <dt>Requests/s</dt>
        <dd>{fixed(rate("vllm:e2e_request_latency_seconds_count"), 2)}</dd>
        <dt>TTFT p50 / p99</dt>
        <dd data-testid="engine-ttft">
          {seconds1000(ttft(0.5))} / {seconds1000(ttft(0.99))}
        </dd>
      </dl>
      {history.length > 1 ? (
        <ChartCanvas
          label={`Tokens per second, ${model.id}`}
          config={{
            type: "line",
            data: {
              labels: history.map((_, i) => `${Math.round(((history.length - i) * POLL_MS) / 1000)}s`),
              datasets: [{ label: "tokens/s", data: history, borderColor: "#4f7cff", pointRadius: 0 }],
            },
            options: { plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true } } },
          }}
        />
      ) : null}
    </article>
  );
}

function fixed(value: number | null, digits: number): string {
  return value === null ? "–" : value.toFixed(digits);
}

function seconds1000(value: number | null): string {
  return value === null ? "–" : value < 1 ? `${Math.round(value * 1000)} ms` : `${value.toFixed(2)} s`;
}
