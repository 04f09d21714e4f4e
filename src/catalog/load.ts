/** Reads the default catalog shipped with the package plus an optional user catalog, and validates both. */
import { readFile } from "node:fs/promises";
import { dirname, isAbsolute, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { z } from "zod";
import { catalogFileSchema } from "./schema.js";
import { parseSource } from "./source.js";
import type { CatalogEntry, CatalogFileEntry } from "./types.js";
import { extraCatalogPath } from "../config/environment.js";

/** src/catalog/load.ts and dist/catalog/load.js are both two folders below the package root. */
export const DEFAULT_CATALOG_PATH = fileURLToPath(new URL("../../catalog/models.json", import.meta.url));

export interface LoadCatalogOptions {
  /** A user catalog whose entries are added to the default ones; falls back to env SWITCHYARD_CATALOG. */
  extraCatalogPath?: string;
}

export async function loadCatalog(options: LoadCatalogOptions = {}): Promise<CatalogEntry[]> {
  const entries = await readCatalogFile(DEFAULT_CATALOG_PATH);
  const extraPath = options.extraCatalogPath ?? extraCatalogPath();
  if (!extraPath) return resolveAdapters(entries);
  const merged = mergeCatalogs(entries, await readCatalogFile(resolve(extraPath)));
  checkNamesUnique(merged, `catalogs ${DEFAULT_CATALOG_PATH} + ${resolve(extraPath)}`);
  return resolveAdapters(merged);
}

/** Every id and alias names one model: an alias that is another entry's id or alias would make a request ambiguous. */
export function checkNamesUnique(entries: readonly CatalogFileEntry[], origin: string): void {
  const owner = new Map<string, string>();
  for (const [index, entry] of entries.entries()) {
    for (const name of [entry.id, ...(entry.aliases ?? [])]) {
      const other = owner.get(name);
      if (other !== undefined) {
        const problem = name === entry.id && other === entry.id ? "id appears more than once" : `'${name}' already names '${other}'`;
        throw new Error(`Invalid ${origin}:\n  - entry #${index + 1} '${entry.id}': ${problem}`);
      }
      owner.set(name, entry.id);
    }
  }
}

/**
 * Adapters (`adapter_of`) against the merged catalog: the base must be there, run here (a `source`,
 * not a `backend`), be a chat model and no adapter itself; an adapter without pricing takes its base's.
 */
export function resolveAdapters(entries: readonly CatalogFileEntry[]): CatalogEntry[] {
  const byId = new Map(entries.map((entry) => [entry.id, entry]));
  return entries.map((entry) => {
    if (entry.adapter_of === undefined) return entry as CatalogEntry;
    const base = byId.get(entry.adapter_of);
    const problem = !base
      ? "which is not in the catalog"
      : base.adapter_of !== undefined
        ? "which is an adapter itself"
        : base.source === undefined
          ? "which upstream engines serve (an adapter needs the embedded engine)"
          : base.tags.includes("Embedding")
            ? "which is an embedding model"
            : undefined;
    if (problem) throw new Error(`Invalid catalog: '${entry.id}' is an adapter of '${entry.adapter_of}', ${problem}`);
    return { ...entry, pricing: entry.pricing ?? base!.pricing! };
  });
}

/** A user entry with the same id replaces the default one in place; new ids are appended. */
export function mergeCatalogs<T extends CatalogFileEntry>(base: T[], extra: T[]): T[] {
  const merged = new Map(base.map((entry) => [entry.id, entry]));
  for (const entry of extra) merged.set(entry.id, entry);
  return [...merged.values()];
}

/** Reads and validates one catalog file; `file:` sources come back as absolute paths. */
export async function readCatalogFile(path: string): Promise<CatalogFileEntry[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new Error(`Cannot read catalog ${path}: ${(err as Error).message}`, { cause: err });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`Catalog ${path} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  return parseCatalog(raw, path);
}

/** Validates already-parsed catalog JSON; `origin` is the file it came from (names it in errors, anchors relative paths). */
export function parseCatalog(raw: unknown, origin: string): CatalogFileEntry[] {
  const result = catalogFileSchema.safeParse(raw);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => describeIssue(raw, issue));
    throw new Error(`Invalid catalog ${origin}:\n  - ${problems.join("\n  - ")}`);
  }
  const entries = result.data.models;
  checkNamesUnique(entries, `catalog ${origin}`);
  const catalogDir = dirname(origin);
  return entries.map((entry) => ({
    ...entry,
    ...(entry.source !== undefined ? { source: anchorFileSource(entry.source, catalogDir) } : {}),
    ...(entry.fallback_chat_template ? { fallback_chat_template: resolve(catalogDir, entry.fallback_chat_template) } : {}),
  }));
}

/** `file:` paths written relative to a catalog file mean relative to that file's folder, not the cwd. */
function anchorFileSource(source: string, catalogDir: string): string {
  const parsed = parseSource(source);
  if (parsed?.kind !== "file" || isAbsolute(parsed.path)) return source;
  return `file:${resolve(catalogDir, parsed.path)}`;
}

/** e.g. `entry #2 'acme/foo': pricing.input must be a decimal string such as "0.02" (got number 0.1)`. */
function describeIssue(raw: unknown, issue: z.core.$ZodIssue): string {
  const path = issue.path.map((key) => (typeof key === "symbol" ? key.toString() : key));
  let where = "catalog";
  let fieldPath = path;
  if (path[0] === "models" && typeof path[1] === "number") {
    const id = valueAt(raw, ["models", path[1], "id"]);
    where = `entry #${path[1] + 1}${typeof id === "string" ? ` '${id}'` : ""}`;
    fieldPath = path.slice(2);
  }
  const field = fieldPath.length ? fieldPath.map((key, i) => (typeof key === "number" ? `[${key}]` : i ? `.${key}` : key)).join("") : "";
  if (issue.code === "unrecognized_keys") {
    const names = issue.keys.map((key) => (field ? `${field}.${key}` : key));
    return `${where}: unknown field${names.length > 1 ? "s" : ""} ${names.join(", ")} (check the spelling)`;
  }
  return `${where}: ${field ? `${field} ` : ""}${issue.message} (got ${describeValue(valueAt(raw, path))})`;
}

function valueAt(root: unknown, path: (string | number)[]): unknown {
  let node = root;
  for (const key of path) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string | number, unknown>)[key];
  }
  return node;
}

function describeValue(value: unknown): string {
  if (value === undefined) return "nothing: the field is missing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return `${typeof value} ${JSON.stringify(value)}`;
}
