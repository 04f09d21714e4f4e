import type { Command } from "commander";
import { findLiveServer } from "../accounts/local-server.js";
import { cliApiKey } from "../config/environment.js";
import { resolveDataDir } from "../config/paths.js";

/** The flags every command that calls a running server's API takes. */
export interface ApiFlags {
  apiKey?: string;
  url?: string;
  dataDir?: string;
  json?: boolean;
}

export type Api = <T>(method: string, path: string, body?: unknown) => Promise<T>;

export const withApiOptions = (c: Command) =>
  c
    .option("--api-key <key>", "an API key of the account (default: SWITCHYARD_API_KEY)")
    .option("--url <url>", "the server's address (default: the server running on the data dir)")
    .option("--data-dir <dir>", "data directory (default: SWITCHYARD_DATA_DIR or ~/.local/share/switchyard)")
    .option("--json", "print the API's JSON");

/** Calls the API of --url, or of the server running on the data dir, with the account's key; an error answer throws its message. */
export function apiClient(flags: ApiFlags, env: NodeJS.ProcessEnv): Api {
  const key = flags.apiKey ?? cliApiKey(env);
  if (!key) throw new Error("An API key is needed: --api-key KEY or SWITCHYARD_API_KEY.");
  const base = flags.url ?? findLiveServer(resolveDataDir(flags.dataDir))?.url;
  if (!base) throw new Error("No server is running on this data dir; give its address with --url.");
  return async <T>(method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(new URL(path, base), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const payload = (await response.json().catch(() => null)) as { error?: { message?: string } } | null;
    if (!response.ok) throw new Error(payload?.error?.message ?? `The server answered HTTP ${response.status}.`);
    return payload as T;
  };
}

/** A plain-text table: a header row, then aligned columns. */
export function textTable(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]?.length ?? 0)));
  return [header, ...rows]
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
