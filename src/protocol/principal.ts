/**
 * Who is asking: the account and key a request authenticated as. One type from authentication
 * (accounts/principals.ts) through the HTTP layer and serving to the ledger row; each layer reads
 * the fields it needs.
 */

/** Per-key limits as stored with the key; null means the server default applies. */
export interface KeyLimits {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  /** Spend budget in US dollars (exact decimal string); null means unlimited. */
  budgetUsd: string | null;
}

export interface Principal {
  accountId: string;
  accountName: string;
  keyId: string;
  /** The models the key may use (by id or alias); null: every model. */
  allowedModels: string[] | null;
  /** The key's own limits (null fields: server default / no budget). */
  limits: KeyLimits;
  /** The key was created with the manage-keys right: it may list, create and revoke its account's keys. */
  manageKeys: boolean;
  /** The key was created with the manage-deployments right: it may create, scale and delete its account's deployments. */
  manageDeployments: boolean;
  /** Set when the request is a line of this batch: it is served and billed at the batch tier. */
  batchId?: string;
}

/** What serving reads of a principal: what scopes, limits and bills a request. */
export type Caller = Pick<Principal, "accountId" | "keyId" | "allowedModels" | "limits" | "batchId">;
