/**
 * The key and account objects of `/v1/keys` and the admin API, in the OpenAI style (snake_case,
 * unix-second timestamps). Declared here so the routes that produce them (accounts/admin-wire.ts
 * builds them), the CLI that reads them back and the console agree by construction.
 */

export interface WireKey {
  object: "api_key";
  id: string;
  account: string;
  name: string | null;
  prefix: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  last_used_at: number | null;
  allowed_models: string[] | null;
  /** null: the server default applies. */
  rpm_limit: number | null;
  /** null: the server default applies. */
  tpm_limit: number | null;
  /**
   * US dollars as an exact decimal *string* ("25.5"), null for no budget. Strings, so no JSON
   * reader turns money into a float on the way.
   */
  budget_usd: string | null;
  /** US dollars settled against the key so far, exact decimal string. */
  spent_usd: string;
  /** The key may list, create and revoke its own account's keys (GET/POST/DELETE /v1/keys). */
  manage_keys: boolean;
  /** The key may create, scale and delete its own account's deployments (POST/PATCH/DELETE /v1/deployments). */
  manage_deployments: boolean;
}

/** A key as its creation answers it: the only time the secret is shown. */
export interface WireCreatedKey extends WireKey {
  key: string;
}

export interface WireAccount {
  object: "account";
  id: string;
  name: string;
  disabled: boolean;
  created_at: number;
}

export interface WireRevokedKey {
  id: string;
  object: "api_key";
  revoked: true;
}
