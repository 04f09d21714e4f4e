import { NotFound } from "../errors.js";
import { openDatabase } from "../storage/open.js";
import { httpKeyAdmin } from "./admin-client.js";
import { findLiveServer } from "./local-server.js";
import { createKey, listKeys, revokeKey, type CreateKeyInput, type CreatedKey, type KeyInfo } from "./store.js";

/** What the CLI needs to manage keys, whichever way it reaches the database. */
export interface KeyAdmin {
  createKey(input: CreateKeyInput): Promise<CreatedKey>;
  listKeys(filter?: { account?: string }): Promise<KeyInfo[]>;
  /** Throws NotFound when no key has that id. */
  revokeKey(id: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Through the admin API of the server running on this data dir if there is one (it holds the
 * PGlite directory, which a second process cannot open), else straight on the database.
 */
export async function openKeyAdmin(dataDir: string): Promise<KeyAdmin> {
  const server = findLiveServer(dataDir);
  if (server) return httpKeyAdmin(server);

  const db = await openDatabase({ dataDir });
  return {
    createKey: (input) => createKey(db, input),
    listKeys: (filter) => listKeys(db, filter),
    async revokeKey(id) {
      if (!(await revokeKey(db, id))) throw new NotFound(`No API key with id '${id}'.`);
    },
    close: () => db.close(),
  };
}
