import { Command, InvalidArgumentError } from "commander";
import { toWireKey } from "../accounts/admin-wire.js";
import { openKeyAdmin, type KeyAdmin } from "../accounts/key-admin.js";
import type { CreatedKey, KeyInfo } from "../accounts/key-store.js";
import { resolveDataDir } from "../config/paths.js";
import { textTable } from "./api-client.js";

export interface KeysCommandOptions {
  /** Where output goes; tests pass a collector. Defaults to process.stdout. */
  stdout?: { write(text: string): unknown };
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** `switchyard keys create|list|revoke|set-limits`: works whether or not a server runs on the same data dir. */
// long-by-design: the CLI definition, one declarative commander chain of subcommands and their options.
export function keysCommand(options: KeysCommandOptions = {}): Command {
  const stdout = options.stdout ?? process.stdout;
  const print = (line = "") => stdout.write(`${line}\n`);

  const keys = new Command("keys").description("Create, list, revoke and limit API keys");

  keys
    .command("create")
    .description("Create an API key; the key is printed once, alone on the last line")
    .requiredOption("--account <name>", "account the key belongs to (created if missing)")
    .option("--name <name>", "a label for the key")
    .option("--expires-in-days <days>", "expire the key after this many days", parsePositiveNumber)
    .option("--models <list>", "comma-separated models the key may use (default: all)", parseModelList)
    .option("--rpm <n>", "requests per minute for this key (default: the server's)", parseRateLimit)
    .option("--tpm <n>", "tokens per minute for this key (default: the server's)", parseRateLimit)
    .option("--budget <usd>", "spend budget in US dollars, e.g. 25 or 0.50 (default: none)", parseBudget)
    .option("--manage-keys", "let this key list, create and revoke its own account's keys (/v1/keys, the console's Keys page)")
    .option("--manage-deployments", "let this key create, scale and delete its own account's dedicated deployments (/v1/deployments)")
    .option("--data-dir <dir>", "data directory (default: SWITCHYARD_DATA_DIR or ~/.local/share/switchyard)")
    .action(
      async (opts: {
        account: string;
        name?: string;
        expiresInDays?: number;
        models?: string[];
        rpm?: number;
        tpm?: number;
        budget?: string;
        manageKeys?: boolean;
        manageDeployments?: boolean;
        dataDir?: string;
      }) => {
        const created = await withKeyAdmin(opts.dataDir, (admin) =>
          admin.createKey({
            account: opts.account,
            name: opts.name,
            expiresAt: opts.expiresInDays === undefined ? undefined : new Date(Date.now() + opts.expiresInDays * DAY_MS),
            allowedModels: opts.models,
            requestsPerMinute: opts.rpm,
            tokensPerMinute: opts.tpm,
            budgetUsd: opts.budget,
            manageKeys: opts.manageKeys === true,
            manageDeployments: opts.manageDeployments === true,
          }),
        );
        printCreated(print, created);
      },
    );

  keys
    .command("set-limits")
    .description("Change a key's requests/minute, tokens/minute or spend budget ('none' clears one)")
    .argument("<id>", "key id, e.g. key_…")
    .option("--rpm <n>", "requests per minute, or none for the server default", orNone(parseRateLimit))
    .option("--tpm <n>", "tokens per minute, or none for the server default", orNone(parseRateLimit))
    .option("--budget <usd>", "spend budget in US dollars, or none for no budget", orNone(parseBudget))
    .option("--data-dir <dir>", "data directory (default: SWITCHYARD_DATA_DIR or ~/.local/share/switchyard)")
    .action(async (id: string, opts: { rpm?: number | None; tpm?: number | None; budget?: string | None; dataDir?: string }) => {
      if (opts.rpm === undefined && opts.tpm === undefined && opts.budget === undefined) {
        throw new Error("Nothing to change: give --rpm, --tpm and/or --budget.");
      }
      const updated = await withKeyAdmin(opts.dataDir, (admin) =>
        admin.setKeyLimits(id, {
          requestsPerMinute: cleared(opts.rpm),
          tokensPerMinute: cleared(opts.tpm),
          budgetUsd: cleared(opts.budget),
        }),
      );
      print(`Updated ${updated.id}: ${describeLimits(updated)}.`);
    });

  keys
    .command("list")
    .description("List API keys (never shows the keys themselves)")
    .option("--account <name>", "only this account's keys")
    .option("--json", "print JSON instead of a table")
    .option("--data-dir <dir>", "data directory (default: SWITCHYARD_DATA_DIR or ~/.local/share/switchyard)")
    .action(async (opts: { account?: string; json?: boolean; dataDir?: string }) => {
      const list = await withKeyAdmin(opts.dataDir, (admin) => admin.listKeys({ account: opts.account }));
      if (opts.json) print(JSON.stringify(list.map(toWireKey), null, 2));
      else print(formatKeyTable(list));
    });

  keys
    .command("revoke")
    .description("Revoke an API key by id")
    .argument("<id>", "key id, e.g. key_…")
    .option("--data-dir <dir>", "data directory (default: SWITCHYARD_DATA_DIR or ~/.local/share/switchyard)")
    .action(async (id: string, opts: { dataDir?: string }) => {
      await withKeyAdmin(opts.dataDir, (admin) => admin.revokeKey(id));
      print(`Revoked ${id}.`);
    });

  return keys;
}

async function withKeyAdmin<T>(dataDirFlag: string | undefined, work: (admin: KeyAdmin) => Promise<T>): Promise<T> {
  const admin = await openKeyAdmin(resolveDataDir(dataDirFlag));
  try {
    return await work(admin);
  } finally {
    await admin.close();
  }
}

function printCreated(print: (line?: string) => void, created: CreatedKey): void {
  print(`Created API key ${created.id} for account '${created.account}'.`);
  if (created.name) print(`  name:    ${created.name}`);
  print(`  expires: ${created.expiresAt ? created.expiresAt.toISOString() : "never"}`);
  print(`  models:  ${created.allowedModels ? created.allowedModels.join(", ") : "all"}`);
  print(`  limits:  ${describeLimits(created)}`);
  print(`  rights:  ${describeRights(created)}`);
  print("Store the key now; it cannot be shown again:");
  // Alone on the last line, so `... | tail -n 1` captures exactly the key.
  print(created.key);
}

export function formatKeyTable(list: KeyInfo[]): string {
  const header = [
    "ID",
    "ACCOUNT",
    "NAME",
    "PREFIX",
    "CREATED",
    "EXPIRES",
    "REVOKED",
    "LAST USED",
    "RPM",
    "TPM",
    "BUDGET USD",
    "SPENT USD",
    "MANAGE KEYS",
    "MANAGE DEPLOYMENTS",
  ];
  const rows = list.map((key) => [
    key.id,
    key.account,
    key.name ?? "-",
    `${key.prefix}…`,
    formatDate(key.createdAt),
    formatDate(key.expiresAt),
    formatDate(key.revokedAt),
    formatDate(key.lastUsedAt),
    key.requestsPerMinute === null ? "default" : String(key.requestsPerMinute),
    key.tokensPerMinute === null ? "default" : String(key.tokensPerMinute),
    key.budgetUsd ?? "unlimited",
    key.spentUsd,
    key.manageKeys ? "yes" : "no",
    key.manageDeployments ? "yes" : "no",
  ]);
  return rows.length === 0 ? "No API keys." : textTable(header, rows);
}

function describeRights(key: KeyInfo): string {
  const rights = [key.manageKeys && "manage keys", key.manageDeployments && "manage deployments"].filter(Boolean);
  return rights.length ? rights.join(", ") : "none";
}

/** Minute precision in UTC: enough to read, and the same on every machine. */
function formatDate(date: Date | null): string {
  return date ? `${date.toISOString().slice(0, 16).replace("T", " ")}Z` : "-";
}

function parsePositiveNumber(value: string): number {
  const days = Number(value);
  if (!Number.isFinite(days) || days <= 0) throw new InvalidArgumentError("Expected a positive number of days.");
  return days;
}

function describeLimits(key: KeyInfo): string {
  const rate = (value: number | null, unit: string) => (value === null ? `server default ${unit}` : `${value} ${unit}`);
  // Spend is counted with a budget or without, so it is shown either way.
  const budget = `${key.budgetUsd === null ? "no budget" : `budget $${key.budgetUsd}`} (spent $${key.spentUsd})`;
  return `${rate(key.requestsPerMinute, "RPM")}, ${rate(key.tokensPerMinute, "TPM")}, ${budget}`;
}

function parseRateLimit(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("Expected a positive whole number.");
  return n;
}

/** Kept as the exact text typed (the store validates and normalises it); never through a float. */
function parseBudget(value: string): string {
  const text = value.trim();
  if (!/^\d+(?:\.\d+)?$/.test(text)) throw new InvalidArgumentError("Expected an amount in US dollars, such as 25 or 0.50.");
  return text;
}

/** "none" on the command line; commander turns a parser's null into "", hence a marker rather than null. */
const NONE = "none";
type None = typeof NONE;

function orNone<T>(parse: (value: string) => T): (value: string) => T | None {
  return (value) => (value.trim().toLowerCase() === NONE ? NONE : parse(value));
}

/** undefined (flag not given) stays undefined; "none" becomes null (clear the limit). */
function cleared<T>(value: T | None | undefined): T | null | undefined {
  return value === NONE ? null : value;
}

function parseModelList(value: string): string[] {
  const models = value
    .split(",")
    .map((model) => model.trim())
    .filter((model) => model !== "");
  if (models.length === 0) throw new InvalidArgumentError("Expected at least one model name.");
  return models;
}
