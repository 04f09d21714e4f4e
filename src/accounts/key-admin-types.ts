/** What the CLI's key and usage commands need, served by the database (key-admin.ts) or by a running server (admin-client.ts). */
import type { UsageGroupBy, UsageReport } from "../protocol/usage.js";
import type { CreateKeyInput, CreatedKey, KeyInfo, KeyLimitChanges } from "./key-store.js";

/** One account's usage, by account name; start inclusive, end exclusive. */
export interface AccountUsageQuery {
  account: string;
  start?: Date;
  end?: Date;
  groupBy?: UsageGroupBy;
}

/** What the CLI needs to manage keys, whichever way it reaches the database. */
export interface KeyAdmin {
  createKey(input: CreateKeyInput): Promise<CreatedKey>;
  listKeys(filter?: { account?: string }): Promise<KeyInfo[]>;
  /** Throws NotFound when no key has that id. */
  revokeKey(id: string): Promise<void>;
  /** Sets (value), clears (null) or keeps (undefined) a key's limits. Throws NotFound when no key has that id. */
  setKeyLimits(id: string, changes: KeyLimitChanges): Promise<KeyInfo>;
  /** Throws NotFound when no account has that name. */
  usage(query: AccountUsageQuery): Promise<UsageReport>;
  close(): Promise<void>;
}
