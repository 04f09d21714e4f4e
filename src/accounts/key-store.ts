import { InvalidRequest } from "../errors.js";
import type { Database } from "../storage/database.js";
import { generateApiKey } from "./api-key.js";
import { keysChanged } from "./key-cache.js";
import { normalDecimal, toKeyGrants, type KeyGrantColumns } from "./key-row.js";
import { newId } from "./ids.js";

export interface Account {
  id: string;
  name: string;
  disabled: boolean;
  createdAt: Date;
}

/** What listings show about a key: never its hash, never the key itself. */
export interface KeyInfo {
  id: string;
  account: string;
  name: string | null;
  prefix: string;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  /** null: every model. */
  allowedModels: string[] | null;
  /** null: the server default applies. */
  requestsPerMinute: number | null;
  /** null: the server default applies. */
  tokensPerMinute: number | null;
  /** Spend budget in US dollars, exact decimal string; null: unlimited. */
  budgetUsd: string | null;
  /** Settled spend against the budget so far, exact decimal string (counted whether or not there is a budget). */
  spentUsd: string;
  /** The key may list, create and revoke its own account's keys through /v1/keys. */
  manageKeys: boolean;
  /** The key may create, scale and delete its own account's dedicated deployments (/v1/deployments). */
  manageDeployments: boolean;
}

export interface CreatedKey extends KeyInfo {
  /** The plaintext key. Returned once, at creation; only its hash is stored. */
  key: string;
}

export interface CreateKeyInput {
  /** Account name; the account is created if it does not exist yet. */
  account: string;
  name?: string;
  expiresAt?: Date;
  /** Omit for every model. */
  allowedModels?: string[];
  /** Omit (or null) for the server default. */
  requestsPerMinute?: number | null;
  /** Omit (or null) for the server default. */
  tokensPerMinute?: number | null;
  /** Non-negative decimal string in US dollars, e.g. "25" or "0.50"; omit (or null) for no budget. */
  budgetUsd?: string | null;
  /** Grants the manage-keys right (default false). */
  manageKeys?: boolean;
  /** Grants the manage-deployments right (default false). */
  manageDeployments?: boolean;
}

/** Changes to a key's limits: a value sets it, null clears it (server default / no budget), undefined leaves it. */
export interface KeyLimitChanges {
  requestsPerMinute?: number | null;
  tokensPerMinute?: number | null;
  budgetUsd?: string | null;
}

/** Who is calling, once a bearer token has been accepted. */
interface AccountRow {
  id: string;
  name: string;
  disabled: boolean;
  created_at: Date;
}

interface KeyRow extends KeyGrantColumns {
  id: string;
  account_name: string;
  name: string | null;
  prefix: string;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
  spent_usd: string;
}

/** The key columns every KeyInfo is built from, for RETURNING and SELECT lists (table alias optional). */
function keyColumns(alias = ""): string {
  const p = alias ? `${alias}.` : "";
  return [
    "id",
    "name",
    "prefix",
    "created_at",
    "expires_at",
    "revoked_at",
    "last_used_at",
    "allowed_models",
    "rpm_limit",
    "tpm_limit",
    "budget_usd",
    "spent_usd",
    "manage_keys",
    "manage_deployments",
  ]
    .map((column) => p + column)
    .join(", ");
}

const MAX_NAME_LENGTH = 200;
/** rpm_limit and tpm_limit are PostgreSQL integers. */
const MAX_RATE_LIMIT = 2_147_483_647;
/** Plain decimal dollars: up to 15 integer digits and 18 decimals, no sign or exponent. */
const BUDGET_PATTERN = /^\d{1,15}(?:\.\d{1,18})?$/;

export async function createAccount(db: Database, name: string): Promise<Account> {
  const rows = await db.query<AccountRow>("INSERT INTO accounts (id, name) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING *", [
    newId("acct"),
    validAccountName(name),
  ]);
  const row = rows[0];
  if (!row) throw new InvalidRequest(`An account named '${name}' already exists.`, "name", "account_exists");
  return toAccount(row);
}

export async function findOrCreateAccount(db: Database, name: string): Promise<Account> {
  const accountName = validAccountName(name);
  // ON CONFLICT DO NOTHING makes a concurrent creator wait for the other insert instead of failing.
  const inserted = await db.query<AccountRow>("INSERT INTO accounts (id, name) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING *", [
    newId("acct"),
    accountName,
  ]);
  const row = inserted[0] ?? (await db.query<AccountRow>("SELECT * FROM accounts WHERE name = $1", [accountName]))[0];
  if (!row) throw new Error(`Account '${accountName}' vanished while being created.`);
  return toAccount(row);
}

export async function findAccount(db: Database, name: string): Promise<Account | null> {
  if (!storable(name)) return null; // no stored name holds one, and PostgreSQL refuses a NUL as a parameter
  const rows = await db.query<AccountRow>("SELECT * FROM accounts WHERE name = $1", [name]);
  return rows[0] ? toAccount(rows[0]) : null;
}

/** Returns the updated account, or null when there is no account with that name. */
export async function setAccountDisabled(db: Database, name: string, disabled: boolean): Promise<Account | null> {
  if (!storable(name)) return null;
  const rows = await db.query<AccountRow>("UPDATE accounts SET disabled = $2 WHERE name = $1 RETURNING *", [name, disabled]);
  keysChanged();
  return rows[0] ? toAccount(rows[0]) : null;
}

export async function createKey(db: Database, input: CreateKeyInput): Promise<CreatedKey> {
  const name = optionalKeyName(input.name);
  const allowedModels = input.allowedModels === undefined ? null : validModelList(input.allowedModels);
  if (input.expiresAt !== undefined && Number.isNaN(input.expiresAt.getTime())) {
    throw new InvalidRequest("expires_at is not a valid date.", "expires_at");
  }
  const rpm = optionalRateLimit(input.requestsPerMinute, "rpm_limit");
  const tpm = optionalRateLimit(input.tokensPerMinute, "tpm_limit");
  const budget = optionalBudget(input.budgetUsd);

  return db.transaction(async (tx) => {
    const account = await findOrCreateAccount(tx, input.account);
    const generated = generateApiKey();
    const rows = await tx.query<Omit<KeyRow, "account_name">>(
      `INSERT INTO api_keys (id, account_id, name, prefix, secret_hash, expires_at, allowed_models, rpm_limit, tpm_limit, budget_usd, manage_keys, manage_deployments)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::numeric, $11, $12)
       RETURNING ${keyColumns()}`,
      [
        newId("key"),
        account.id,
        name,
        generated.prefix,
        generated.secretHash,
        input.expiresAt ?? null,
        allowedModels,
        rpm ?? null,
        tpm ?? null,
        budget ?? null,
        input.manageKeys === true,
        input.manageDeployments === true,
      ],
    );
    const row = rows[0];
    if (!row) throw new Error("Inserting the API key returned no row.");
    return { ...toKeyInfo({ ...row, account_name: account.name }), key: generated.key };
  });
}

export async function listKeys(db: Database, filter: { account?: string } = {}): Promise<KeyInfo[]> {
  if (filter.account !== undefined && !storable(filter.account)) return [];
  const rows = await db.query<KeyRow>(
    `SELECT ${keyColumns("k")}, a.name AS account_name
       FROM api_keys k JOIN accounts a ON a.id = k.account_id
      WHERE $1::text IS NULL OR a.name = $1::text
      ORDER BY k.created_at, k.id`,
    [filter.account ?? null],
  );
  return rows.map(toKeyInfo);
}

/**
 * Sets, clears (null) or keeps (undefined) a key's RPM, TPM and budget. Returns the updated key, or
 * null when no key has that id. Spend so far is kept: lowering a budget below it stops the key.
 */
export async function setKeyLimits(db: Database, id: string, changes: KeyLimitChanges): Promise<KeyInfo | null> {
  if (!storable(id)) return null;
  const assignments: string[] = [];
  const params: unknown[] = [id];
  const set = (column: string, value: unknown, cast = "") => {
    params.push(value);
    assignments.push(`${column} = $${params.length}${cast}`);
  };
  const rpm = optionalRateLimit(changes.requestsPerMinute, "rpm_limit");
  const tpm = optionalRateLimit(changes.tokensPerMinute, "tpm_limit");
  const budget = optionalBudget(changes.budgetUsd);
  if (rpm !== undefined) set("rpm_limit", rpm, "::integer");
  if (tpm !== undefined) set("tpm_limit", tpm, "::integer");
  if (budget !== undefined) set("budget_usd", budget, "::numeric");

  const rows = await db.query<KeyRow>(
    assignments.length === 0
      ? `SELECT ${keyColumns("k")}, a.name AS account_name FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = $1`
      : `UPDATE api_keys k SET ${assignments.join(", ")} FROM accounts a
          WHERE k.id = $1 AND a.id = k.account_id
          RETURNING ${keyColumns("k")}, a.name AS account_name`,
    params,
  );
  if (assignments.length > 0) keysChanged();
  return rows[0] ? toKeyInfo(rows[0]) : null;
}

/**
 * Revokes a key; revoking it again keeps the first revocation time. Returns false when no key has
 * that id, or (with `accountId`) when the key belongs to another account: the account-scoped API
 * cannot tell the two apart, so it cannot probe other accounts' key ids.
 */
export async function revokeKey(db: Database, id: string, scope: { accountId?: string } = {}): Promise<boolean> {
  if (!storable(id)) return false;
  const rows = await db.query(
    "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 AND ($2::text IS NULL OR account_id = $2::text) RETURNING id",
    [id, scope.accountId ?? null],
  );
  keysChanged();
  return rows.length > 0;
}

function toAccount(row: AccountRow): Account {
  return { id: row.id, name: row.name, disabled: row.disabled, createdAt: row.created_at };
}

function toKeyInfo(row: KeyRow): KeyInfo {
  return {
    id: row.id,
    account: row.account_name,
    name: row.name,
    prefix: row.prefix,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    lastUsedAt: row.last_used_at,
    ...toKeyGrants(row),
    spentUsd: normalDecimal(row.spent_usd),
  };
}

function validAccountName(name: string): string {
  const trimmed = name.trim();
  // Names appear in URLs and CLI tables: printable, no whitespace.
  if (trimmed === "" || trimmed.length > MAX_NAME_LENGTH || /[\s\p{Cc}]/u.test(trimmed)) {
    throw new InvalidRequest(
      `Account names must be 1-${MAX_NAME_LENGTH} printable characters without spaces.`,
      "account",
      "invalid_account_name",
    );
  }
  return trimmed;
}

function optionalKeyName(name: string | undefined): string | null {
  if (name === undefined) return null;
  const trimmed = name.trim();
  if (trimmed.length > MAX_NAME_LENGTH || /\p{Cc}/u.test(trimmed)) {
    throw new InvalidRequest(`Key names must be at most ${MAX_NAME_LENGTH} printable characters.`, "name");
  }
  return trimmed === "" ? null : trimmed;
}

/** Text PostgreSQL can take: no NUL byte. */
function storable(text: string): boolean {
  return !text.includes("\u0000");
}

function validModelList(models: string[]): string[] {
  const cleaned = [...new Set(models.map((model) => model.trim()).filter((model) => model !== ""))];
  if (cleaned.some((model) => model.length > 256 || /\p{Cc}/u.test(model))) {
    throw new InvalidRequest("allowed_models entries must be model ids: at most 256 printable characters.", "allowed_models");
  }
  if (cleaned.length === 0) {
    throw new InvalidRequest("allowed_models must name at least one model; omit it to allow every model.", "allowed_models");
  }
  return cleaned;
}

/** undefined stays undefined (not given), null stays null (cleared); else a positive integer. */
export function optionalRateLimit(value: number | null | undefined, param: string): number | null | undefined {
  if (value === undefined || value === null) return value;
  if (!Number.isSafeInteger(value) || value < 1 || value > MAX_RATE_LIMIT) {
    throw new InvalidRequest(`${param} must be a positive integer (at most ${MAX_RATE_LIMIT}), or null for the server default.`, param);
  }
  return value;
}

/** undefined stays undefined (not given), null stays null (no budget); else a normalised non-negative decimal string. */
export function optionalBudget(value: string | null | undefined): string | null | undefined {
  if (value === undefined || value === null) return value;
  const trimmed = typeof value === "string" ? value.trim() : value;
  if (typeof trimmed !== "string" || !BUDGET_PATTERN.test(trimmed)) {
    throw new InvalidRequest(
      'budget_usd must be a non-negative decimal amount in US dollars, such as "25" or "0.50", or null for no budget.',
      "budget_usd",
    );
  }
  return normalDecimal(trimmed);
}
