/** `switchyard models pull|list`: fetch catalog models ahead of time and show what the catalog offers. */
import { Command } from "commander";
import { resolveModelsDir } from "../config/paths.js";
import { formatBytes } from "../catalog/format.js";
import { loadCatalog } from "../catalog/load.js";
import { ensureModels, findPulledModel } from "../catalog/pull.js";
import type { CatalogEntry } from "../catalog/types.js";

export function modelsCommand(): Command {
  const models = new Command("models").description("Manage the model catalog and the local model files");

  models
    .command("pull")
    .description("Download catalog models into the models dir (all of them when no id is given)")
    .argument("[ids...]", "model ids or aliases, e.g. qwen2.5-coder-0.5b or HuggingFaceTB/SmolLM2-135M-Instruct")
    .option("--catalog <file>", "extra catalog file whose entries add to (or replace) the default ones")
    .action(async (ids: string[], options: { catalog?: string }) => {
      const catalog = await loadCatalog({ extraCatalogPath: options.catalog });
      // Without ids: every model but the on-demand ones, which are pulled only when named.
      // Models served by upstream engines have no file to pull.
      const entries = ids.length
        ? selectEntries(catalog, ids)
        : catalog.filter((entry) => entry.pull !== "on_demand" && entry.source !== undefined);
      for (const entry of catalog.filter((e) => !ids.length && e.pull === "on_demand")) {
        process.stderr.write(`${entry.id} is pulled on demand: 'switchyard models pull ${entry.id}'\n`);
      }
      const pulled = await ensureModels(entries, { modelsDir: resolveModelsDir(), progress: true });
      const rows = pulled.map((model) => [model.id, formatBytes(model.bytes), model.path]);
      process.stdout.write(formatTable(rows));
    });

  models
    .command("list")
    .description("Show the catalog: context, precision, tags, prices (USD per 1M tokens) and whether each model is pulled")
    .option("--catalog <file>", "extra catalog file whose entries add to (or replace) the default ones")
    .option("--json", "print JSON instead of a table")
    .action(async (options: { catalog?: string; json?: boolean }) => {
      const catalog = await loadCatalog({ extraCatalogPath: options.catalog });
      const modelsDir = resolveModelsDir();
      const listed = await Promise.all(catalog.map(async (entry) => ({ entry, local: await findPulledModel(entry, modelsDir) })));
      if (options.json) {
        const json = listed.map(({ entry, local }) => ({
          ...entry,
          pulled: local !== null,
          on_demand: entry.pull === "on_demand",
          path: local?.path ?? null,
          published_path: local?.published.path ?? null,
        }));
        process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
        return;
      }
      const header = ["ID", "ALIASES", "CONTEXT", "PRECISION", "TAGS", "INPUT", "OUTPUT", "CACHED", "PULLED"];
      const rows = listed.map(({ entry, local }) => [
        entry.id,
        entry.aliases?.join(",") || "-",
        String(entry.context_length),
        entry.precision,
        entry.tags.join(",") || "-",
        `$${entry.pricing.input}`,
        `$${entry.pricing.output}`,
        `$${entry.pricing.cached_input}`,
        local ? `yes (${formatBytes(local.bytes)})` : entry.backend ? "upstream" : entry.pull === "on_demand" ? "no (on demand)" : "no",
      ]);
      process.stdout.write(formatTable([header, ...rows]));
    });

  return models;
}

/** The requested entries (by id or alias) in the order asked, or the whole catalog; unknown names fail before anything downloads. */
function selectEntries(catalog: CatalogEntry[], ids: string[]): CatalogEntry[] {
  if (ids.length === 0) return catalog;
  const byId = new Map(catalog.flatMap((entry) => [entry.id, ...(entry.aliases ?? [])].map((name) => [name, entry] as const)));
  const unknown = ids.filter((id) => !byId.has(id));
  if (unknown.length) {
    throw new Error(
      `unknown model${unknown.length > 1 ? "s" : ""} ${unknown.map((id) => `'${id}'`).join(", ")}; the catalog has: ${catalog.map((e) => e.id).join(", ")}`,
    );
  }
  return [...new Set(ids.map((id) => byId.get(id)!))];
}

/** Left-aligned columns separated by two spaces; the last column is not padded. */
function formatTable(rows: string[][]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return (
    rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")).join("\n") +
    (rows.length ? "\n" : "")
  );
}
