import { queryAccountUsage } from "../billing/instance-usage.js";
import { NotFound } from "../errors.js";
import { openDatabase } from "../storage/open.js";
import { httpKeyAdmin } from "./admin-client.js";
import { liveLockHolder } from "../config/data-dir-lock.js";
import { findLiveServer, type LocalServer } from "./local-server.js";
import { createKey, findAccount, listKeys, revokeKey, setKeyLimits } from "./key-store.js";
import type { KeyAdmin } from "./key-admin-types.js";

export type { AccountUsageQuery, KeyAdmin } from "./key-admin-types.js";

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
    if (Date.now() > deadline)
      throw new Error(
        `The server holding ${dataDir} has not started its admin API in ${STARTING_SERVER_WAIT_MS / 1000} s; try again when it is up.`,
      );
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return null;
}
