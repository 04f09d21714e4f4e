import { queryAccountUsage } from "../billing/instance-usage.js";
import type { UsageGroupBy, UsageReport } from "../protocol/usage.js";
import { NotFound } from "../errors.js";
import { openDatabase } from "../storage/open.js";
import { httpKeyAdmin } from "./admin-client.js";
import { liveLockHolder } from "../config/data-dir-lock.js";
import { findLiveServer, type LocalServer } from "./local-server.js";
import {
  createKey,
  findAccount,
  listKeys,
  revokeKey,
  setKeyLimits,
  type CreateKeyInput,
  type CreatedKey,
  type KeyInfo,
  type KeyLimitChanges,
} from "./store.js";

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

/**
 * Through the admin API of the server running on this data dir if there is one (it holds the
 * PGlite directory, which a second process cannot open), else straight on the database.
 */
export async function openKeyAdmin(dataDir: string): Promise<KeyAdmin> {
  const server = findLiveServer(dataDir) ?? (await awaitStartingServer(dataDir));
  if (server) return httpKeyAdmin(server);

  const db = await openDatabase({ dataDir });
  return {
    createKey: (input) => createKey(db, input),
    listKeys: (filter) => listKeys(db, filter),
    async revokeKey(id) {
      if (!(await revokeKey(db, id))) throw new NotFound(`No API key with id '${id}'.`);
    },
    async setKeyLimits(id, changes) {
      const updated = await setKeyLimits(db, id, changes);
      if (!updated) throw new NotFound(`No API key with id '${id}'.`);
      return updated;
    },
    async usage({ account, start, end, groupBy }) {
      const found = await findAccount(db, account.trim());
      if (!found) throw new NotFound(`No account named '${account.trim()}'.`);
      return queryAccountUsage(db, { accountId: found.id, start, end, groupBy });
    },
    close: () => db.close(),
  };
}

const STARTING_SERVER_WAIT_MS = 120_000;

/**
 * A server that holds the data dir but has not written server.json yet is starting (migrating,
 * creating the first key): the database is its, so this waits for its admin API rather than
 * opening the database beside it. Null when no server holds the data dir.
 */
async function awaitStartingServer(dataDir: string): Promise<LocalServer | null> {
  const deadline = Date.now() + STARTING_SERVER_WAIT_MS;
  while (liveLockHolder(dataDir)) {
    const server = findLiveServer(dataDir);
    if (server) return server;
    if (Date.now() > deadline) throw new Error(`The server holding ${dataDir} has not started its admin API in ${STARTING_SERVER_WAIT_MS / 1000} s; try again when it is up.`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return null;
}
