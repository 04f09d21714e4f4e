import { useEffect, useState } from "preact/hooks";
import { ApiError, call, messageOf } from "../api.js";
import { ChartCanvas, PALETTE } from "../chart.js";
import { ErrorBox, useNotify } from "../feedback.js";
import { csvRow } from "../csv.js";
import { addDays, dollars, integer, utcDay } from "../format.js";
import type { Session } from "../session.js";
import type { UsageReport, UsageTotals, WireKey } from "../wire.js";

type GroupBy = "model" | "key";

interface Row extends UsageTotals {
  day: string;
  group: string;
}

interface Loaded {
  totals: UsageTotals;
  rows: Row[];
  days: string[];
}

const MAX_DAYS = 92;

/**
 * Spend and tokens per UTC day, by model or by key, read from GET /v1/usage: the range's totals
 * in one call, the active days with group_by=day, and each active day's split in one call per
 * day. Every figure shown is one the API returned, so the console and the API agree to the cent.
 */
export function UsagePage({ session }: { session: Session }) {
  const today = utcDay(new Date());
  const [start, setStart] = useState(addDays(today, -6));
  const [end, setEnd] = useState(today);
  const [groupBy, setGroupBy] = useState<GroupBy>("model");
  const [data, setData] = useState<Loaded | null>(null);
  const [keyNames, setKeyNames] = useState<Map<string, string>>(new Map());
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const notify = useNotify();

  const load = async (announce: boolean) => {
    if (start > end) return setError("The start day is after the end day.");
    setBusy(true);
    setError(null);
    try {
      const loaded = await loadUsage(session.key, start, end, groupBy);
      setData(loaded);
      if (announce) notify("ok", `Usage loaded: ${loaded.totals.requests} requests, ${dollars(loaded.totals.cost_usd)}.`);
    } catch (failure) {
      setError(messageOf(failure));
      notify("error", messageOf(failure));
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => void load(false), [groupBy]);
  useEffect(() => {
    // Key names, when this key may list its account's keys; otherwise the ids are shown.
    call<{ data: WireKey[] }>(session.key, "/v1/keys")
      .then((list) => setKeyNames(new Map(list.data.map((k) => [k.id, k.name ?? `${k.prefix}…`]))))
      .catch((failure) => {
        if (!(failure instanceof ApiError && failure.status === 403)) console.warn(messageOf(failure));
      });
  }, [session.key]);

  const label = (group: string) => (groupBy === "key" ? (keyNames.get(group) ?? group) : group);

  return (
    <section class="page">
      <div class="page-head">
        <h1>Usage</h1>
      </div>
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          void load(true);
        }}
      >
        <label>
          From <input type="date" value={start} max={end} name="start" onInput={(e) => setStart((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          To <input type="date" value={end} min={start} name="end" onInput={(e) => setEnd((e.target as HTMLInputElement).value)} />
        </label>
        <span class="muted small">UTC days</span>
        {/* biome-ignore lint/a11y/useSemanticElements: a fieldset's border and legend would restyle the segmented control */}
        <div class="segmented" role="group" aria-label="Group by">
          {(["model", "key"] as const).map((g) => (
            <button type="button" key={g} class={groupBy === g ? "active" : ""} aria-pressed={groupBy === g} onClick={() => setGroupBy(g)}>
              By {g}
            </button>
          ))}
        </div>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Loading…" : "Refresh"}
        </button>
        <button type="button" disabled={!data} onClick={() => data && downloadCsv(data, groupBy, label, start, end)}>
          Export CSV
        </button>
      </form>
      <ErrorBox error={error} />
      {data ? <UsageView data={data} label={label} groupBy={groupBy} /> : busy ? <p class="muted">Loading…</p> : null}
    </section>
  );
}

function UsageView({ data, label, groupBy }: { data: Loaded; label: (g: string) => string; groupBy: GroupBy }) {
  const groups = [...new Set(data.rows.map((r) => r.group))];
  const series = (pick: (r: Row) => number) =>
    groups.map((group, i) => ({
      label: label(group),
      backgroundColor: PALETTE[i % PALETTE.length],
      data: data.days.map((day) => data.rows.filter((r) => r.day === day && r.group === group).reduce((sum, r) => sum + pick(r), 0)),
    }));
  const stacked = { x: { stacked: true }, y: { stacked: true, beginAtZero: true } };
  return (
    <>
      <div class="summary">
        <div class="card stat">
          <span class="muted">Spend</span>
          <strong data-testid="usage-total-cost">{dollars(data.totals.cost_usd)}</strong>
        </div>
        <div class="card stat">
          <span class="muted">Requests</span>
          <strong data-testid="usage-total-requests">{integer(data.totals.requests)}</strong>
        </div>
        <div class="card stat">
          <span class="muted">Tokens</span>
          <strong data-testid="usage-total-tokens">{integer(data.totals.total_tokens)}</strong>
        </div>
      </div>
      <div class="charts">
        <div class="card">
          <h2>Spend per day (USD), by {groupBy}</h2>
          {/* Charts draw floats; the table and totals keep the API's exact decimals. */}
          <ChartCanvas
            label="Spend per day"
            config={{
              type: "bar",
              data: { labels: data.days, datasets: series((r) => Number(r.cost_usd)) },
              options: { scales: { ...stacked, y: { ...stacked.y, ticks: { callback: (value) => plainDollars(Number(value)) } } } },
            }}
          />
        </div>
        <div class="card">
          <h2>Tokens per day, by {groupBy}</h2>
          <ChartCanvas
            label="Tokens per day"
            config={{ type: "bar", data: { labels: data.days, datasets: series((r) => r.total_tokens) }, options: { scales: stacked } }}
          />
        </div>
      </div>
      <div class="card table-wrap">
        <table class="data" data-testid="usage-table">
          <thead>
            <tr>
              <th>Day (UTC)</th>
              <th>{groupBy === "model" ? "Model" : "Key"}</th>
              <th class="num">Requests</th>
              <th class="num">Prompt</th>
              <th class="num">Cached</th>
              <th class="num">Completion</th>
              <th class="num">Total tokens</th>
              <th class="num">Cost (USD)</th>
            </tr>
          </thead>
          <tbody>
            {data.rows.length === 0 ? (
              <tr>
                <td colSpan={8} class="muted">
                  No requests in this range.
                </td>
              </tr>
            ) : null}
            {data.rows.map((r) => (
              <tr key={r.day + r.group}>
                <td>{r.day}</td>
                <td>{label(r.group)}</td>
                <td class="num">{integer(r.requests)}</td>
                <td class="num">{integer(r.prompt_tokens)}</td>
                <td class="num">{integer(r.cached_tokens)}</td>
                <td class="num">{integer(r.completion_tokens)}</td>
                <td class="num">{integer(r.total_tokens)}</td>
                <td class="num">{String(r.cost_usd)}</td>
              </tr>
            ))}
          </tbody>
          <tfoot>
            <tr>
              <th colSpan={2}>Total</th>
              <td class="num">{integer(data.totals.requests)}</td>
              <td class="num">{integer(data.totals.prompt_tokens)}</td>
              <td class="num">{integer(data.totals.cached_tokens)}</td>
              <td class="num">{integer(data.totals.completion_tokens)}</td>
              <td class="num">{integer(data.totals.total_tokens)}</td>
              <td class="num" data-testid="usage-table-total">
                {String(data.totals.cost_usd)}
              </td>
            </tr>
          </tfoot>
        </table>
      </div>
    </>
  );
}

/** Axis labels: small amounts without an exponent ($0.0000007, not 7e-7). */
function plainDollars(value: number): string {
  if (value === 0) return "$0";
  const digits = Math.min(20, Math.max(2, 2 - Math.floor(Math.log10(Math.abs(value)))));
  return `$${value
    .toFixed(digits)
    .replace(/(\.\d*?)0+$/, "$1")
    .replace(/\.$/, "")}`;
}

async function loadUsage(key: string, start: string, end: string, groupBy: GroupBy): Promise<Loaded> {
  const endExclusive = addDays(end, 1);
  const days: string[] = [];
  for (let day = start; day < endExclusive && days.length < MAX_DAYS; day = addDays(day, 1)) days.push(day);
  if (days.length >= MAX_DAYS && addDays(start, MAX_DAYS) < endExclusive) throw new Error(`Pick at most ${MAX_DAYS} days.`);
  const range = (from: string, to: string, group?: string) => `/v1/usage?start=${from}&end=${to}${group ? `&group_by=${group}` : ""}`;
  const byDay = await call<UsageReport>(key, range(start, endExclusive, "day"));
  const active = byDay.data.filter((d) => d.requests > 0).map((d) => d.group);
  const splits = await Promise.all(active.map((day) => call<UsageReport>(key, range(day, addDays(day, 1), groupBy))));
  const rows = splits.flatMap((split, i) => split.data.map((g) => ({ ...g, day: active[i]! })));
  return { totals: byDay.totals, rows, days };
}

function downloadCsv(data: Loaded, groupBy: GroupBy, label: (g: string) => string, start: string, end: string): void {
  const header = [
    "day",
    groupBy,
    groupBy === "key" ? "key_name" : null,
    "requests",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "total_tokens",
    "cost_usd",
  ].filter((h) => h !== null);
  const lines = data.rows.map((r) =>
    csvRow([
      r.day,
      r.group,
      ...(groupBy === "key" ? [label(r.group)] : []),
      r.requests,
      r.prompt_tokens,
      r.cached_tokens,
      r.completion_tokens,
      r.total_tokens,
      String(r.cost_usd),
    ]),
  );
  const csv = `${[csvRow(header), ...lines].join("\n")}\n`;
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([csv], { type: "text/csv" }));
  link.download = `switchyard-usage-${start}-${end}-by-${groupBy}.csv`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}
