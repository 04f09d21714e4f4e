import { useEffect, useState } from "preact/hooks";
import { call, messageOf } from "../api.js";
import { ErrorBox, useNotify } from "../feedback.js";
import { integer, multiplyDecimal } from "../format.js";
import type { Session } from "../session.js";
import type { Exact, PriceTriple, WireModel } from "../wire.js";

const TIERS = ["default", "priority", "flex", "batch"] as const;
const TIER_LABEL = { default: "Standard", priority: "Priority", flex: "Flex", batch: "Batch" } as const;

/** Every model the key may use, with per-tier prices and live status (polled while loading). */
export function ModelsPage({ session }: { session: Session }) {
  const [models, setModels] = useState<WireModel[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const notify = useNotify();

  const load = async (announce = false) => {
    try {
      const list = await call<{ data: WireModel[] }>(session.key, "/v1/compat/models");
      setModels(list.data);
      setError(null);
      if (announce) notify("ok", `Refreshed: ${list.data.length} model${list.data.length === 1 ? "" : "s"}.`);
    } catch (failure) {
      setError(messageOf(failure));
      if (announce) notify("error", messageOf(failure));
    }
  };

  useEffect(() => {
    void load();
    const timer = setInterval(() => void load(), 10_000);
    return () => clearInterval(timer);
  }, [session.key]);

  return (
    <section class="page">
      <div class="page-head">
        <h1>Models</h1>
        <button type="button" onClick={() => void load(true)}>
          Refresh
        </button>
      </div>
      <p class="muted">Prices in US dollars per 1M tokens: input / output / cached input.</p>
      <ErrorBox error={error} />
      {models === null && !error ? <p class="muted">Loading…</p> : null}
      <div class="model-grid">
        {models?.map((model) => (
          <ModelCard key={model.id} model={model} />
        ))}
      </div>
    </section>
  );
}

function ModelCard({ model }: { model: WireModel }) {
  const { metadata } = model;
  const discount = Number(metadata.pricing.discount_percent);
  return (
    <article class="card model" data-model={model.id}>
      <header class="model-head">
        <h2>{model.id}</h2>
        <span class={`status status-${metadata.status}`} data-testid="model-status">
          {metadata.status}
        </span>
      </header>
      <dl class="facts">
        <dt>Context</dt>
        <dd>{integer(metadata.context_length)} tokens</dd>
        <dt>Precision</dt>
        <dd>{metadata.precision}</dd>
        <dt>Tags</dt>
        <dd>
          {metadata.tags.length
            ? metadata.tags.map((tag) => (
                <span key={tag} class="tag">
                  {tag}
                </span>
              ))
            : "–"}
        </dd>
      </dl>
      <table class="prices">
        <thead>
          <tr>
            <th>Tier</th>
            <th>Input</th>
            <th>Output</th>
            <th>Cached</th>
          </tr>
        </thead>
        <tbody>
          {TIERS.map((tier) => {
            const prices = metadata.pricing.tiers[tier];
            if (!prices) return null;
            // The standard tier has no multiplier: the others' are over its prices.
            const multiplier = "multiplier" in prices ? prices.multiplier : undefined;
            const list = listFor(metadata.pricing.list, multiplier);
            return (
              <tr key={tier} data-tier={tier}>
                <th>
                  {TIER_LABEL[tier]}
                  {multiplier !== undefined ? <span class="muted small"> ×{String(multiplier)}</span> : null}
                </th>
                {(["input", "output", "cached_input"] as const).map((part) => (
                  <td key={part}>
                    {discount > 0 ? <s class="list-price">${list[part]}</s> : null} <span class="price">${String(prices[part])}</span>
                  </td>
                ))}
              </tr>
            );
          })}
        </tbody>
      </table>
      {discount > 0 ? <p class="discount">{String(metadata.pricing.discount_percent)}% off list price</p> : null}
    </article>
  );
}

/** The undiscounted price of a tier: list × multiplier, done on decimal digits so nothing rounds. */
function listFor(list: PriceTriple, multiplier: Exact | undefined): Record<"input" | "output" | "cached_input", string> {
  const times = (price: Exact) => (multiplier === undefined ? String(price) : multiplyDecimal(String(price), String(multiplier)));
  return { input: times(list.input), output: times(list.output), cached_input: times(list.cached_input) };
}
