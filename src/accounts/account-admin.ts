import { NotFound } from "../errors.js";
import type { KeyLimitsBody, NewKeyBody } from "../protocol/key-request.js";
import type { Database } from "../storage/database.js";
import type { WireAccount, WireCreatedKey, WireKey, WireRevokedKey } from "../protocol/keys-response.js";
import { toWireAccount, toWireCreatedKey, toWireKey } from "./admin-wire.js";
import { budgetText, toCreateKeyInput } from "./key-body.js";
import { createKey, findAccount, listKeys, revokeKey, setAccountDisabled, setKeyLimits } from "./key-store.js";

/** The operator's key and account administration (/admin/v1), over any account. Unknown ids and names are NotFound. */
export interface AccountAdmin {
  createKey(account: string, body: NewKeyBody): Promise<WireCreatedKey>;
  listKeys(filter: { account?: string }): Promise<WireKey[]>;
  /** A value sets a limit, null clears it, an absent field keeps it. */
  setKeyLimits(id: string, body: KeyLimitsBody): Promise<WireKey>;
  revokeKey(id: string): Promise<WireRevokedKey>;
  findAccount(name: string): Promise<WireAccount>;
  /** A disabled account's keys stop working (and its deployments stop: `onAccountDisabled`). */
  setAccountDisabled(name: string, disabled: boolean): Promise<WireAccount>;
}

export interface AccountAdminOptions {
  /** An account was disabled: its deployments' instances stop at once (they bill nothing after). */
  onAccountDisabled?: (accountId: string) => Promise<void>;
  /** Awaited before keys' spend is read (createAccountKeys' `spendSettled`). */
  spendSettled?: () => Promise<void>;
}

export function createAccountAdmin(db: Database, options: AccountAdminOptions = {}): AccountAdmin {
  const noKey = (id: string) => new NotFound(`No API key with id '${id}'.`);
  const noAccount = (name: string) => new NotFound(`No account named '${name}'.`);
  return {
    createKey: async (account, body) => toWireCreatedKey(await createKey(db, toCreateKeyInput(account, body))),
    async listKeys(filter) {
      await options.spendSettled?.();
      return (await listKeys(db, filter)).map(toWireKey);
    },
    async setKeyLimits(id, body) {
      await options.spendSettled?.();
      const changes = { requestsPerMinute: body.rpm_limit, tokensPerMinute: body.tpm_limit, budgetUsd: budgetText(body.budget_usd) };
      const updated = await setKeyLimits(db, id, changes);
      if (!updated) throw noKey(id);
      return toWireKey(updated);
    },
    async revokeKey(id) {
      if (!(await revokeKey(db, id))) throw noKey(id);
      return { id, object: "api_key", revoked: true };
    },
    async findAccount(name) {
      const found = await findAccount(db, name);
      if (!found) throw noAccount(name);
      return toWireAccount(found);
    },
    async setAccountDisabled(name, disabled) {
      const account = await setAccountDisabled(db, name, disabled);
      if (!account) throw noAccount(name);
      if (disabled) await options.onAccountDisabled?.(account.id);
      return toWireAccount(account);
    },
  };
}
