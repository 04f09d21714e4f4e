import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createKey, findOrCreateAccount } from "../accounts/key-store.js";
import { countActiveKeys } from "../accounts/principals.js";
import type { Database } from "../storage/database.js";

/**
 * A fresh install gets one key for the `default` account, shown once; only its hash is stored.
 * It is printed only to a terminal: redirected output ends up in logs, so then it goes to a file
 * only the owner can read, and the output says where.
 */
export async function ensureFirstKey(db: Database, dataDir: string): Promise<void> {
  if ((await countActiveKeys(db)) > 0) return;
  await findOrCreateAccount(db, "default");
  // The owner's key: it may also manage the account's keys (the console's Keys page, /v1/keys)
  // and its dedicated deployments.
  const created = await createKey(db, { account: "default", name: "first key", manageKeys: true, manageDeployments: true });
  if (process.stdout.isTTY) {
    process.stdout.write(
      `\nCreated an API key for account 'default'. It is shown only this once; store it now:\n\n    ${created.key}\n\n` +
        `Create more with 'switchyard keys create --account NAME'.\n\n`,
    );
    return;
  }
  const file = join(dataDir, FIRST_KEY_FILE);
  mkdirSync(dataDir, { recursive: true });
  rmSync(file, { force: true }); // a file left by an earlier install may be readable by others
  writeFileSync(file, `${created.key}\n`, { mode: 0o600, flag: "wx" });
  process.stdout.write(
    `\nCreated an API key for account 'default'. Standard output is not a terminal, so the key is not printed: ` +
      `it is in ${file} (readable only by you). Store it and delete the file.\n\n`,
  );
}

const FIRST_KEY_FILE = "first-api-key.txt";
