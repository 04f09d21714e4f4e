import { parseWireUsageReport } from "../protocol/usage.js";
import { ServiceError, type ErrorType } from "../errors.js";
import type { WireCreatedKey, WireKey } from "../protocol/keys-response.js";
import { fromWireCreatedKey, fromWireKey } from "./admin-wire.js";
import type { KeyAdmin } from "./key-admin-types.js";
import type { LocalServer } from "./local-server.js";

/** One admin API call; `parse` turns a successful body into the result (plain JSON.parse unless a caller needs exact numbers). */
type AdminCall = <T>(method: string, path: string, body?: unknown, parse?: (text: string) => T) => Promise<T>;

function adminCaller(server: LocalServer): AdminCall {
  return async <T>(method: string, path: string, body?: unknown, parse: (text: string) => T = (text) => parseOrNull(text) as T) => {
    const headers: Record<string, string> = { authorization: `Bearer ${server.adminToken}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await fetch(new URL(path, server.url), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (error) {
      throw new Error(`The Switchyard server at ${server.url} is running but did not answer (${(error as Error).message}).`);
    }
    const text = await response.text().catch(() => "");
    if (!response.ok) throw errorFromResponse(response.status, parseOrNull(text));
    return parse(text);
  };
}

/** KeyAdmin over a running server's admin API, for when that server holds the database. */
export function httpKeyAdmin(server: LocalServer): KeyAdmin {
  const call = adminCaller(server);
  return {
    async createKey(input) {
      const created = await call<WireCreatedKey>("POST", "/admin/v1/keys", {
        account: input.account,
        name: input.name,
        expires_at: input.expiresAt?.toISOString(),
        allowed_models: input.allowedModels,
        rpm_limit: input.requestsPerMinute ?? undefined,
        tpm_limit: input.tokensPerMinute ?? undefined,
        budget_usd: input.budgetUsd ?? undefined,
        manage_keys: input.manageKeys || undefined,
        manage_deployments: input.manageDeployments || undefined,
      });
      return fromWireCreatedKey(created);
    },
    async listKeys(filter = {}) {
      const query = filter.account === undefined ? "" : `?account=${encodeURIComponent(filter.account)}`;
      const list = await call<{ data: WireKey[] }>("GET", `/admin/v1/keys${query}`);
      return list.data.map(fromWireKey);
    },
    async revokeKey(id) {
      await call("DELETE", `/admin/v1/keys/${encodeURIComponent(id)}`);
    },
    async setKeyLimits(id, changes) {
      // undefined fields vanish in JSON (kept as they are); null ones clear the limit.
      const updated = await call<WireKey>("PATCH", `/admin/v1/keys/${encodeURIComponent(id)}`, {
        rpm_limit: changes.requestsPerMinute,
        tpm_limit: changes.tokensPerMinute,
        budget_usd: changes.budgetUsd,
      });
      return fromWireKey(updated);
    },
    async usage({ account, start, end, groupBy }) {
      const query = new URLSearchParams({ account });
      if (start) query.set("start", start.toISOString());
      if (end) query.set("end", end.toISOString());
      if (groupBy) query.set("group_by", groupBy);
      // Costs are exact JSON numbers on the wire; parseWireUsageReport reads them without a float.
      return call("GET", `/admin/v1/usage?${query.toString()}`, undefined, parseWireUsageReport);
    },
    async close() {},
  };
}

function parseOrNull(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/** Rebuilds the server's typed error from its OpenAI-shaped body, so callers see the same error either way. */
function errorFromResponse(status: number, payload: unknown): ServiceError {
  const error = (payload as { error?: { message?: unknown; type?: unknown; code?: unknown; param?: unknown } } | null)?.error;
  const message = typeof error?.message === "string" ? error.message : `The server answered HTTP ${status}.`;
  const type = (typeof error?.type === "string" ? error.type : "server_error") as ErrorType;
  const code = typeof error?.code === "string" ? error.code : null;
  const param = typeof error?.param === "string" ? error.param : null;
  return new ServiceError(status, type, message, code, param);
}
